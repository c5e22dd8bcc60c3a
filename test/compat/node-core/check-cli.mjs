// The admin CLI as an operator runs it: `npx nestjs-redlock ...`, from the package installed out
// of the packed tarball (its `bin`), against the real masters the runner started (REDLOCK_NODES).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { Redlock } from 'nestjs-redlock/core';

const npx = (...args) => {
  const result = spawnSync('npx', ['--no-install', 'nestjs-redlock', ...args], { encoding: 'utf8', env: process.env });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
};

const urls = (process.env.REDLOCK_NODES ?? '').split(',').filter(Boolean);
assert.ok(urls.length >= 3, 'set REDLOCK_NODES to the URLs of at least 3 masters');

const help = npx('--help');
assert.equal(help.code, 0, help.stderr);
assert.match(help.stdout, /Usage: nestjs-redlock <command>/);
assert.equal(npx('release', 'x').code, 2, 'release without --force is a usage error');

const clients = urls.map((url) => new Redis(url, { maxRetriesPerRequest: 1 }));
const redlock = new Redlock(clients, { restartQuarantineMs: false });
const resource = `compat-cli:${randomUUID()}`;
try {
  const lock = await redlock.acquire(resource, 60_000, { fencing: true });
  // A grant settles at a quorum: wait until every master has it, as the CLI reads them all.
  for (let i = 0; (await redlock.inspect(resource))[0].masters.some((m) => m.state !== 'held'); i++) {
    assert.ok(i < 100, 'the lock never reached every master');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const inspected = npx('inspect', resource, '--json');
  assert.equal(inspected.code, 0, inspected.stderr);
  const [seen] = JSON.parse(inspected.stdout);
  assert.equal(seen.state, 'held');
  assert.equal(seen.fence, lock.fence);
  assert.ok(!inspected.stdout.includes(lock.token), 'the token is never printed');

  const masters = npx('masters', '--json');
  assert.equal(masters.code, 0, masters.stdout + masters.stderr);
  assert.deepEqual(JSON.parse(masters.stdout).masters.map((m) => m.permissions.denied), urls.map(() => []));

  const forced = npx('release', resource, '--force', '--json');
  assert.equal(forced.code, 0, forced.stderr);
  const report = JSON.parse(forced.stdout);
  assert.equal(report.freedOn, urls.length);
  assert.ok(report.fence > lock.fence, 'the fence is raised past the old holder');
  const next = await redlock.tryAcquire(resource, 5_000, { fencing: true });
  assert.ok(next && next.fence > report.fence, 'the next holder gets it at once, with a larger fence');
  await next.release();
  console.log('npx nestjs-redlock: help, inspect, masters and release --force as documented');
} finally {
  redlock.close();
  await Promise.all(clients.map((client) => client.quit()));
}
