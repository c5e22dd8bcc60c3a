import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { connectMasters, PATIENT, separateEngine } from '../support/masters.js';
import { fileFleet } from '../support/file-fleet.js';

// The admin CLI as the built package runs it (dist/cli/main.js, the package's `bin`; `npm run
// build` comes first in CI), against real masters. test/compat/cli runs it through `npx` from the
// packed tarball.

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
const run = promisify(execFile);

const { fleet: masters, opened } = fileFleet(3);

/** Runs the CLI; resolves with its exit code and output whatever the code. */
async function cli(args: readonly string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

const nodes = () => ['--nodes', masters().urls().join(',')];

describe('npx nestjs-redlock', () => {
  it('is built', () => {
    expect(existsSync(CLI)).toBe(true);
  });

  it('inspects a held lock and a free one, in words and in JSON, with exit code 0', async () => {
    const { redlock } = await separateEngine(masters().urls(), opened, PATIENT);
    const lock = await redlock.acquire('cli:order:1', 30_000, { fencing: true });
    await expect.poll(async () => (await redlock.inspect('cli:order:1'))[0]!.masters.filter((m) => m.state === 'held').length).toBe(3);
    const words = await cli(['inspect', 'cli:order:1', 'cli:order:2', ...nodes()]);
    expect(words.code).toBe(0);
    expect(words.stdout).toMatch(/^cli:order:1: held \(exclusive, holder [0-9a-f]{12}, frees in \d+-\d+ ms, fence \d+, 0 waiting\)$/m);
    expect(words.stdout).toMatch(/^cli:order:2: free \(0 waiting\)$/m);
    expect(words.stdout).not.toContain(lock.token);
    const json = await cli(['inspect', 'cli:order:1', '--json'], { REDLOCK_NODES: masters().urls().join(',') });
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject([{ resource: 'cli:order:1', state: 'held', kind: 'exclusive', fence: lock.fence }]);
    await lock.release();
  });

  it('lists the waiters, first in line first', async () => {
    const holder = await separateEngine(masters().urls(), opened, PATIENT);
    const waiter = await separateEngine(masters().urls(), opened, PATIENT);
    const lock = await holder.redlock.acquire('cli:queue', 30_000);
    const waiting = waiter.redlock.acquire('cli:queue', 30_000, { waitTimeoutMs: 20_000 });
    await expect.poll(async () => (await holder.redlock.waiters('cli:queue')).waiters.length).toBe(1);
    const listed = await cli(['waiters', 'cli:queue', '--json', ...nodes()]);
    expect(listed.code).toBe(0);
    const { waiters } = JSON.parse(listed.stdout) as { waiters: { id: string; masters: number }[] };
    expect(waiters).toHaveLength(1);
    expect(waiters[0]!.id).toMatch(/^[\w-]+:\d+$/);
    await lock.release();
    await (await waiting).release();
  });

  it('release --force breaks a stuck lock and raises its fence: the next holder gets it at once, and the old holder\'s fenced write is refused', async () => {
    const { redlock } = await separateEngine(masters().urls(), opened, PATIENT);
    const stuck = await redlock.acquire('cli:stuck', 60_000, { fencing: true });
    const refused = await cli(['release', 'cli:stuck', ...nodes()]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/add --force/);
    const forced = await cli(['release', 'cli:stuck', '--force', '--json', ...nodes()]);
    expect(forced.code).toBe(0);
    const report = JSON.parse(forced.stdout) as { freedOn: number; fence: number };
    expect(report.freedOn).toBe(3);
    expect(report.fence).toBeGreaterThan(stuck.fence!);
    // A store that checks fencing tokens, as the docs describe: it keeps the highest it has seen.
    const store = new Map<string, number>();
    const write = (fence: number) => {
      if (fence < (store.get('order') ?? 0)) return false;
      store.set('order', fence);
      return true;
    };
    const other = await separateEngine(masters().urls(), opened, PATIENT);
    const next = await other.redlock.tryAcquire('cli:stuck', 10_000, { fencing: true });
    expect(next).not.toBeNull();
    expect(next!.fence!).toBeGreaterThan(report.fence);
    expect(write(next!.fence!)).toBe(true);
    expect(write(stuck.fence!)).toBe(false);
    await next!.release();
  });

  it('reports the masters, the permissions of the connection\'s user, and 3 when too few answer', async () => {
    const healthy = await cli(['masters', '--json', ...nodes()]);
    expect(healthy.code).toBe(0);
    const report = JSON.parse(healthy.stdout) as { quorum: number; masters: { node: string; reachable: boolean; permissions: { denied: string[] } }[] };
    expect(report.quorum).toBe(2);
    expect(report.masters.map((master) => master.permissions.denied)).toEqual([[], [], []]);

    // A user without the scripts' commands on one master: named, and exit code 1.
    const [admin] = await connectMasters([masters().urls()[0]!]);
    opened.push(admin!);
    await admin!.call('ACL', 'SETUSER', 'locker', 'on', '>s3cret-pass', '~*', '&*', '+@all', '-eval', '-evalsha');
    const url = new URL(masters().urls()[0]!);
    const limited = [`redis://locker:s3cret-pass@${url.host}`, ...masters().urls().slice(1)].join(',');
    const denied = await cli(['masters', '--nodes', limited]);
    expect(denied.code).toBe(1);
    expect(denied.stdout).toMatch(/denied: .*EVAL on redlock:\*/);
    expect(denied.stdout + denied.stderr).not.toContain('s3cret-pass');

    const down = ['redis://127.0.0.1:1', 'redis://127.0.0.1:2', masters().urls()[0]!].join(',');
    const unreachable = await cli(['masters', '--nodes', down, '--timeout', '200']);
    expect(unreachable.code).toBe(3);
    expect(unreachable.stdout).toMatch(/127\.0\.0\.1:1: unreachable/);
  });

  it('answers usage errors with 2 and the help with 0, naming what was wrong', async () => {
    expect((await cli(['--help'])).code).toBe(0);
    const none = await cli(['inspect', 'x'], { REDLOCK_NODES: '' });
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/no masters: give --nodes/);
    expect((await cli(['frobnicate', ...nodes()])).stderr).toMatch(/unknown command 'frobnicate'/);
    expect((await cli(['waiters', ...nodes()])).code).toBe(2);
    expect((await cli(['inspect', 'x', '--timeout', 'soon', ...nodes()])).stderr).toMatch(/--timeout must be a whole number/);
  });
});
