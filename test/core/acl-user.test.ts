import { readFileSync } from 'node:fs';
import 'reflect-metadata';
import { Test } from '@nestjs/testing';
import { describe, expect, it } from 'vitest';
import { PermissionDeniedError } from '../../lib/core/index.js';
import { RedlockConfigError, RedlockModule } from '../../lib/index.js';
import { connectMasters, PATIENT } from '../support/masters.js';
import { CLIENT_LIBRARIES, MODULE_CLIENT_LIBRARIES, separateEngineOn, type ClientLibrary } from '../support/lock-clients.js';
import { fileFleet } from '../support/file-fleet.js';
import { heldEverywhere } from '../support/enlisted.js';

// The engine run as the least-privilege Redis user docs/production.md documents: the rule is
// read from the docs, so the two cannot drift apart.

const { fleet: masters, opened } = fileFleet(3);
const PASSWORD = 'pa55-for-locker';

/** The `ACL SETUSER locker ...` line of the docs, as arguments, with the password put in. */
function documentedRule(): string[] {
  const docs = readFileSync(new URL('../../docs/production.md', import.meta.url), 'utf8');
  const line = /^ACL SETUSER locker .*$/m.exec(docs)?.[0];
  if (!line) throw new Error('docs/production.md has no ACL SETUSER locker line');
  return line.split(/\s+/).slice(2).map((part) => part.replace('>password', `>${PASSWORD}`));
}

async function createUser(name: string, rule: readonly string[]): Promise<string[]> {
  const admins = await connectMasters(masters().urls());
  opened.push(...admins);
  await Promise.all(admins.map((admin) => admin.call('ACL', 'SETUSER', name, 'reset', ...rule.slice(1))));
  return masters().urls().map((url) => `redis://${name}:${PASSWORD}@${new URL(url).host}`);
}

describe.each(CLIENT_LIBRARIES)('a Redis user with the least privilege, on %s', (library: ClientLibrary) => {
  it('runs every feature as the documented ACL user: locks, waiting and hand-off, fencing, readers, permits, elections, inspection', async () => {
    const urls = await createUser('locker', documentedRule());
    const a = await separateEngineOn(library, urls, opened, { ...PATIENT, restartQuarantineMs: 'max-ttl', quarantineAtFirstSight: false });
    const b = await separateEngineOn(library, urls, opened, PATIENT);
    await a.redlock.verifyPermissions();
    const plain = await a.redlock.acquire('acl:plain', 5_000);
    await plain.release();
    const held = await a.redlock.acquire('acl:queue', 5_000, { fencing: true });
    const waiting = b.redlock.acquire('acl:queue', 5_000, { waitTimeoutMs: 10_000 });
    await expect.poll(async () => (await a.redlock.waiters('acl:queue')).waiters.length).toBe(1);
    await held.extend();
    await held.release();
    await (await waiting).release();
    const readers = await Promise.all([a.redlock.acquire('acl:doc', 5_000, { mode: 'read' }), b.redlock.acquire('acl:doc', 5_000, { mode: 'read' })]);
    const permit = await a.redlock.acquire('acl:pool', 5_000, { limit: 2, fencing: true });
    expect((await a.redlock.inspect('acl:pool'))[0]!.state).not.toBe('free');
    await Promise.all([...readers, permit].map((lock) => lock.release()));
    const leadership = await a.redlock.election('acl-duty').campaign('pod-a');
    await expect.poll(() => b.redlock.election('acl-duty').leader()).toMatchObject({ identity: 'pod-a' });
    await leadership.resign();
    const stuck = await b.redlock.acquire('acl:stuck', 60_000);
    // The acquire returned at a quorum: the third master's grant may still be on its way.
    const admins = await connectMasters(masters().urls());
    opened.push(...admins);
    await heldEverywhere(admins, 'redlock:acl:stuck');
    expect((await a.redlock.forceRelease('acl:stuck')).freedOn).toBe(3);
    void stuck;
  });

  it("runs as a user that may not run INFO with identifyBy: 'marker', which the default identification names as missing", async () => {
    const urls = await createUser('no-info', documentedRule().filter((part) => part !== '+info'));
    const byInfo = await separateEngineOn(library, urls, opened, PATIENT);
    const error = await byInfo.redlock.verifyPermissions().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermissionDeniedError);
    for (const entry of (error as PermissionDeniedError).denied) expect(entry.commands).toEqual(['INFO']);
    const a = await separateEngineOn(library, urls, opened, { ...PATIENT, identifyBy: 'marker' });
    const b = await separateEngineOn(library, urls, opened, { ...PATIENT, identifyBy: 'marker' });
    await a.redlock.verifyPermissions();
    await a.redlock.verifyMasters();
    const held = await a.redlock.acquire('no-info:lock', 5_000, { fencing: true });
    const waiting = b.redlock.acquire('no-info:lock', 5_000, { fencing: true, waitTimeoutMs: 10_000 });
    await held.release();
    const next = await waiting;
    expect(next.fence).toBeGreaterThan(held.fence!);
    await next.release();
  });

  it('names what a user may not run, per master, at verifyPermissions and at the Nest module\'s bootstrap, without its password', async () => {
    const urls = await createUser('half', documentedRule().filter((part) => part !== '+evalsha' && part !== '+hgetall'));
    const { redlock } = await separateEngineOn(library, urls, opened, PATIENT);
    const error = await redlock.verifyPermissions().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermissionDeniedError);
    const denied = (error as PermissionDeniedError).denied;
    expect(denied.map((entry) => entry.node)).toEqual(masters().urls().map((url) => new URL(url).host));
    // Refused at the top level, and inside the scripts (which run with the user's rights).
    for (const entry of denied) expect(entry.commands).toEqual(expect.arrayContaining(['EVALSHA', 'HGETALL (in scripts)']));
    expect((error as Error).message).not.toContain(PASSWORD);

    // The module connects URLs with ioredis or the installed redis (5): node-redis 4 is the engine's alone here.
    const client = MODULE_CLIENT_LIBRARIES.find((one) => one === library) ?? 'node-redis';
    const boot = Test.createTestingModule({ imports: [RedlockModule.forRoot({ nodes: urls, client, restartQuarantineMs: false, logger: { warn: () => {} } })] }).compile();
    const bootError = await boot.catch((e: unknown) => e);
    expect(bootError).toBeInstanceOf(RedlockConfigError);
    expect((bootError as Error).message).toMatch(/may not run what the engine needs.*EVALSHA/);
    expect((bootError as Error).message).not.toContain(PASSWORD);
  });
});
