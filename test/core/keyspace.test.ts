import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockHeldError, Redlock, type RedlockOptions } from '../../lib/index.js';
import { connectMasters, disconnectAll, FRESH_FLEET } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';

/**
 * Nothing the engine keeps on the masters grows with the number of distinct resources: lock
 * keys, queue entries and fence counters all expire once no lock can still need them, and
 * fencing tokens still strictly increase across a counter's expiry.
 */
let fleet: RedisFleet;
let direct: Redis[];
const opened: Redis[] = [];
const engines: Redlock[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
  direct = await connectMasters(fleet.urls());
});

afterEach(async () => {
  for (const engine of engines.splice(0)) engine.close();
  disconnectAll(opened.splice(0));
  await Promise.all(direct.map((client) => client.flushall()));
});

afterAll(async () => {
  disconnectAll(direct ?? []);
  await fleet?.stopAll();
});

async function engine(options: RedlockOptions = {}): Promise<Redlock> {
  const clients = await connectMasters(fleet.urls());
  opened.push(...clients);
  const redlock = new Redlock(clients, { ...FRESH_FLEET, logger: { warn: () => {} }, ...options });
  engines.push(redlock);
  await redlock.verifyMasters();
  return redlock;
}

const keysEverywhere = () => Promise.all(direct.map((client) => client.dbsize()));

describe('fence counters', () => {
  it('expire after the lock ttl plus fenceRetentionMs, and tokens still rise across the expiry', async () => {
    const redlock = await engine({ fencing: true, fenceRetentionMs: 300 });
    const first = await redlock.acquire('invoice:1', 400);
    await first.release();
    // Every master that took the write-back gave the counter an expiry of at most ttl + retention.
    const ttls = await Promise.all(direct.map((client) => client.pttl('redlock-fence:invoice:1')));
    expect(ttls.filter((ttl) => ttl > 0 && ttl <= 700).length).toBeGreaterThanOrEqual(2);
    expect(ttls.every((ttl) => ttl === -2 || (ttl > 0 && ttl <= 700))).toBe(true);
    await expect.poll(async () => (await Promise.all(direct.map((c) => c.exists('redlock-fence:invoice:1')))).every((n) => n === 0), {
      timeout: 10_000,
      interval: 50,
    }).toBe(true);

    const second = await redlock.acquire('invoice:1', 400);
    expect(second.fence).toBeGreaterThan(first.fence!);
    await second.release();
  });

  it('are kept for ever without the time floor, which alone would let a token go back', async () => {
    const redlock = await engine({ fencing: true, fenceTimeFloor: false, fenceRetentionMs: 0 });
    const lock = await redlock.acquire('invoice:2', 400);
    await lock.release();
    const ttls = await Promise.all(direct.map((client) => client.pttl('redlock-fence:invoice:2')));
    expect(ttls.filter((ttl) => ttl === -1).length).toBeGreaterThanOrEqual(2);
  });

  it('refuses a retention that is not a number of ms', async () => {
    await expect(engine({ fenceRetentionMs: -1 })).rejects.toThrow(/invalid fenceRetentionMs: -1/);
  });
});

describe('100,000 distinct resources', () => {
  it('leave no key behind once their ttls have passed: plain, fenced, and with waiters', async () => {
    const TTL = 10_000;
    // A generous round deadline: thousands of scripts at once on a shared machine are not a fault here.
    const holder = await engine({ fenceRetentionMs: 500, nodeTimeoutMs: 3_000 });
    const waiter = await engine({ nodeTimeoutMs: 3_000 });
    const plain = Array.from({ length: 80_000 }, (_, i) => `plain:${i}`);
    const fenced = Array.from({ length: 18_000 }, (_, i) => `fenced:${i}`);
    const contended = Array.from({ length: 2_000 }, (_, i) => `contended:${i}`);

    // The most keys a master held while the locks were taken: a slow machine lets the first ones
    // expire before the last are taken, so a count at the end would say little.
    let peak = 0;
    let taking = true;
    const sampling = (async () => {
      while (taking) peak = Math.max(peak, ...(await keysEverywhere()));
    })();

    // Batches, as an app's traffic would come; half the plain locks released, the rest left to expire.
    const inBatches = async <T>(items: readonly T[], size: number, each: (item: T, index: number) => Promise<unknown>) => {
      for (let at = 0; at < items.length; at += size) {
        await Promise.all(items.slice(at, at + size).map((item, k) => each(item, at + k)));
      }
    };
    await inBatches(plain, 4_000, async (resource, i) => {
      const lock = await holder.acquire(resource, TTL);
      if (i % 2 === 0) await lock.release();
    });
    await inBatches(fenced, 2_000, (resource) => holder.acquire(resource, TTL, { fencing: true }));
    // Held by one engine; another waits briefly for each and gives up, leaving its queue entry.
    await inBatches(contended, 1_000, (resource) => holder.acquire(resource, TTL));
    const refused = await inBatches(contended, 1_000, async (resource) => {
      await expect(waiter.acquire(resource, TTL, { waitTimeoutMs: 50, retryDelayMs: 10 })).rejects.toBeInstanceOf(LockHeldError);
    });
    expect(refused).toBeUndefined();

    taking = false;
    await sampling;
    // Up to 40,000 held plain + 18,000 locks and their counters + 2,000 locks and their queues,
    // less what expired already on a slow machine: tens of thousands, in any case.
    expect(peak).toBeGreaterThan(30_000);
    for (const client of direct) expect(await client.exists('redlock-queue:contended:0')).toBeLessThanOrEqual(1);

    await expect.poll(keysEverywhere, { timeout: 45_000, interval: 250 }).toEqual([0, 0, 0]);
  }, 120_000);
});
