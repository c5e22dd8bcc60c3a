// An ESM worker without Nest: import from 'nestjs-redlock/core' takes and releases a lock on
// real masters, and a second engine is refused while it is held.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { Lock, LockHeldError, Redlock } from 'nestjs-redlock/core';
import NodeRedlock, { ExecutionError, Redlock as NamedNodeRedlock } from 'nestjs-redlock/node-redlock';

async function connect(urls) {
  const clients = urls.map((url) => new Redis(url, { maxRetriesPerRequest: 1 }));
  await Promise.all(clients.map((client) => new Promise((resolve, reject) => {
    client.once('ready', resolve);
    client.once('error', reject);
  })));
  return clients;
}

const urls = (process.env.REDLOCK_NODES ?? '').split(',').filter(Boolean);
assert.ok(urls.length >= 3, 'set REDLOCK_NODES to the URLs of at least 3 masters');

const ours = await connect(urls);
const theirs = await connect(urls);
// Two engines over separate connections stand for two processes.
const holder = new Redlock(ours, { restartQuarantineMs: false });
const contender = new Redlock(theirs, { restartQuarantineMs: false });
const resource = `compat-esm:${randomUUID()}`;
try {
  // using(): held while the routine runs, released after it.
  const seen = await holder.using([resource], 5_000, async (signal, lock) => {
    assert.ok(lock instanceof Lock);
    assert.equal(signal.aborted, false);
    assert.equal(await contender.tryAcquire(resource, 5_000), null, 'a second owner got a held lock');
    await assert.rejects(contender.acquire(resource, 5_000, { retryCount: 0 }), LockHeldError);
    return lock.resources;
  });
  assert.deepEqual(seen, [resource]);

  const next = await contender.tryAcquire(resource, 5_000);
  assert.ok(next, 'the lock was not free after using() returned');
  await next.release();
} finally {
  holder.close();
  contender.close();
  for (const client of [...ours, ...theirs]) client.disconnect();
}
console.log(`esm: import from 'nestjs-redlock/core' locked and released ${resource} on ${urls.length} masters`);

// node-redlock's default import, as its users write it: a lock under the bare resource.
assert.equal(NodeRedlock, NamedNodeRedlock, "the default export is not the Redlock class");
const compat = await connect(urls);
const redlock = new NodeRedlock(compat, { retryCount: 1, retryDelay: 10 });
const bare = `compat-esm-node-redlock:${randomUUID()}`;
try {
  const lock = await redlock.acquire([bare], 5_000);
  assert.equal(await compat[0].get(bare), lock.value);
  await assert.rejects(redlock.acquire([bare], 5_000), ExecutionError);
  await lock.release();
} finally {
  redlock.engine.close();
  for (const client of compat) client.disconnect();
}
console.log(`esm: import Redlock from 'nestjs-redlock/node-redlock' locked and released ${bare}`);
