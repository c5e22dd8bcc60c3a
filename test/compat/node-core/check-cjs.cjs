// A CommonJS worker without Nest: require('nestjs-redlock/core') takes and releases a lock on
// real masters, a second engine is refused while it is held, and nothing of Nest is loaded
// (whether or not npm installed Nest here: no-nest.cjs checks that separately).
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const { Redis } = require('ioredis');

const { Redlock, Lock, LockHeldError, QuorumUnreachableError } = require('nestjs-redlock/core');

async function connect(urls) {
  const clients = urls.map((url) => new Redis(url, { maxRetriesPerRequest: 1 }));
  await Promise.all(clients.map((client) => new Promise((resolve, reject) => {
    client.once('ready', resolve);
    client.once('error', reject);
  })));
  return clients;
}

async function main() {
  const urls = (process.env.REDLOCK_NODES ?? '').split(',').filter(Boolean);
  assert.ok(urls.length >= 3, 'set REDLOCK_NODES to the URLs of at least 3 masters');
  assert.equal(typeof QuorumUnreachableError, 'function');

  const ours = await connect(urls);
  const theirs = await connect(urls);
  // Two engines over separate connections stand for two processes.
  const holder = new Redlock(ours, { restartQuarantineMs: false });
  const contender = new Redlock(theirs, { restartQuarantineMs: false });
  const resource = `compat-cjs:${randomUUID()}`;
  try {
    const lock = await holder.acquire(resource, 5_000);
    assert.ok(lock instanceof Lock);
    assert.deepEqual(lock.resources, [resource]);
    assert.equal(await contender.tryAcquire(resource, 5_000), null, 'a second owner got a held lock');
    assert.equal(await holder.tryAcquire(resource, 5_000), null, 'the same engine handed out a held lock twice');
    await assert.rejects(contender.acquire(resource, 5_000, { retryCount: 0 }), LockHeldError);

    await lock.release();
    assert.equal(lock.released, true);
    const next = await contender.tryAcquire(resource, 5_000);
    assert.ok(next, 'the lock was not free after release');
    await next.release();
  } finally {
    holder.close();
    contender.close();
    for (const client of [...ours, ...theirs]) client.disconnect();
  }

  // node-redlock's require, as its CommonJS users write it: `.default` is the class.
  const NodeRedlock = require('nestjs-redlock/node-redlock').default;
  assert.equal(NodeRedlock, require('nestjs-redlock/node-redlock').Redlock);
  const compat = await connect(urls);
  const redlock = new NodeRedlock(compat, { retryCount: 0 });
  try {
    const lock = await redlock.acquire([resource], 5_000);
    assert.equal(await compat[0].get(resource), lock.value);
    await lock.release();
  } finally {
    redlock.engine.close();
    for (const client of compat) client.disconnect();
  }

  const nest = Object.keys(require.cache).filter((file) => /[\\/]node_modules[\\/]@nestjs[\\/]/.test(file));
  assert.deepEqual(nest, [], 'nestjs-redlock/core loaded Nest');
  console.log(`cjs: require('nestjs-redlock/core') locked and released ${resource} on ${urls.length} masters`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
