import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AcquireAbortedError, LockHeldError, QuorumUnreachableError, Redlock, type RedlockOptions } from '../../lib/index.js';
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

    // The most keys the masters held together, counted after each batch: a batch takes seconds
    // and its keys live 10 s, while a loaded machine takes far longer than 10 s over all of them,
    // so a count at the end (or a sampler's few reads under load) would say little.
    let peak = 0;
    const count = async () => {
      peak = Math.max(peak, (await keysEverywhere()).reduce((sum, keys) => sum + keys, 0));
    };

    // Batches, as an app's traffic would come; half the plain locks released, the rest left to expire.
    const inBatches = async <T>(items: readonly T[], size: number, each: (item: T, index: number) => Promise<unknown>) => {
      for (let at = 0; at < items.length; at += size) {
        await Promise.all(items.slice(at, at + size).map((item, k) => each(item, at + k)));
        await count();
      }
    };
    await inBatches(plain, 4_000, async (resource, i) => {
      const lock = await holder.acquire(resource, TTL);
      if (i % 2 === 0) await lock.release();
    });
    await inBatches(fenced, 2_000, (resource) => holder.acquire(resource, TTL, { fencing: true }));
    // Held by one engine; another waits briefly for each and gives up, dropping its queue entries.
    await inBatches(contended, 1_000, (resource) => holder.acquire(resource, TTL));
    // A waiter does enlist in the queues of the masters that refuse it (at least a quorum, 2 of 3).
    const patient = new AbortController();
    const waiting = waiter.acquire('contended:0', TTL, { waitTimeoutMs: 60_000, signal: patient.signal });
    const queued = () => Promise.all(direct.map((client) => client.hlen('redlock-queue:contended:0')));
    await expect.poll(async () => (await queued()).filter((entries) => entries > 0).length, { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
    patient.abort();
    await expect(waiting).rejects.toBeInstanceOf(AcquireAbortedError);
    await inBatches(contended, 1_000, async (resource) => {
      // Refused (LockHeldError), or, with a thousand of them on a loaded machine, not answered within
      // the 50 ms it waits (QuorumUnreachableError): either way it gives up and leaves its entries.
      const gaveUp = await waiter.acquire(resource, TTL, { waitTimeoutMs: 50, retryDelayMs: 10 }).catch((e: unknown) => e);
      expect(gaveUp instanceof LockHeldError || gaveUp instanceof QuorumUnreachableError, String(gaveUp)).toBe(true);
    });

    // One fenced batch alone leaves 2,000 locks and their 2,000 counters on at least 2 of the 3
    // masters each, counted seconds after they were set with a 10 s ttl; on a fast machine the
    // peak is near a hundred thousand.
    expect(peak).toBeGreaterThanOrEqual(8_000);

    await expect.poll(keysEverywhere, { timeout: 45_000, interval: 250 }).toEqual([0, 0, 0]);
  }, 120_000);
});
