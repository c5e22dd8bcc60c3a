import { once } from 'node:events';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockLostError, QuorumUnreachableError, Redlock, type RedlockOptions } from '../../lib/index.js';
import { connectMasters, disconnectAll, FRESH_FLEET } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { TcpProxy } from '../support/tcp-proxy.js';

// An extension that fails may still have reached some masters, with its ttl: after it, the lock
// may rely only on the earlier of its old deadline and the one the new ttl gives.

let fleet: RedisFleet;
const opened: Redis[] = [];
const proxies: TcpProxy[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterAll(async () => {
  disconnectAll(opened);
  await Promise.all(proxies.map((proxy) => proxy.close()));
  await fleet?.stopAll();
});

async function engine(urls = fleet.urls(), options: RedlockOptions = {}): Promise<Redlock> {
  const clients = await connectMasters(urls);
  opened.push(...clients);
  const redlock = new Redlock(clients, { ...FRESH_FLEET, ...options });
  // Identified before its first round, so its takes all go out at once, as a long-lived engine's do.
  await redlock.verifyMasters();
  return redlock;
}

/** The fleet with masters `slow` behind proxies, so they can be given latency. */
async function proxied(slow: readonly number[]): Promise<{ urls: string[]; slowProxies: TcpProxy[] }> {
  const slowProxies: TcpProxy[] = [];
  const urls = await Promise.all(
    fleet.nodes.map(async (node) => {
      if (!slow.includes(node.index)) return node.url;
      const proxy = await TcpProxy.start({ host: node.host, port: node.port });
      proxies.push(proxy);
      slowProxies.push(proxy);
      return proxy.url;
    }),
  );
  return { urls, slowProxies };
}

describe('a failed extension', () => {
  it('with a ttl too short to leave validity loses the lock: no second holder while it looks valid', async () => {
    const a = await engine();
    const b = await engine();
    const lock = await a.acquire('acct', 10_000);
    const error = await lock.extend(2).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnreachableError);
    // The masters now expire the keys within 2 ms: the lock is gone, and says so.
    expect(lock.remainingMs()).toBe(0);
    expect(() => lock.assertValid(1_000)).toThrow(LockLostError);
    expect(lock.signal.aborted).toBe(true);
    expect(lock.signal.reason).toBeInstanceOf(LockLostError);
    expect((lock.signal.reason as LockLostError).message).toMatch(/extension to 2 ms may have shortened the lock/);
    // Another client does get it once the shortened keys expire; by then `a` no longer claims it.
    await expect.poll(async () => {
      const other = await b.tryAcquire('acct', 10_000);
      await other?.release();
      return other !== null;
    }).toBe(true);
    await lock.release();
  });

  it('with a shorter ttl while 2 of 3 masters are slow relies on the shorter deadline, and the signal fires at it', async () => {
    const { urls, slowProxies } = await proxied([1, 2]);
    const a = await engine(urls);
    const b = await engine();
    const lock = await a.acquire('acct-slow', 30_000);
    // Each way: the slow masters answer 2 s after the request, past the latest a round for a 2 s
    // ttl waits however busy this process is (1 s, half the ttl), and apply it 1 s after.
    for (const proxy of slowProxies) proxy.setLatency(1_000);
    try {
      // The fast master applies it at once, the slow ones after the round gave up on them.
      await expect(lock.extend(2_000)).rejects.toBeInstanceOf(QuorumUnreachableError);
    } finally {
      for (const proxy of slowProxies) proxy.setLatency(0);
    }
    expect(lock.remainingMs()).toBeGreaterThan(0);
    expect(lock.remainingMs()).toBeLessThan(2_000);
    expect(() => lock.assertValid(5_000)).toThrow(LockLostError);
    const signal = lock.signal;
    if (!signal.aborted) await once(signal, 'abort');
    // Only now, with `a` told, can another client take it (the keys live 2 s from the extension).
    await expect
      .poll(
        async () => {
          expect(() => lock.assertValid()).toThrow(LockLostError);
          const other = await b.tryAcquire('acct-slow', 10_000);
          await other?.release();
          return other !== null;
        },
        { timeout: 5_000, interval: 50 },
      )
      .toBe(true);
    await lock.release();
  });

  it('with a longer ttl keeps the old deadline, not the new one', async () => {
    const { urls, slowProxies } = await proxied([1, 2]);
    // The slow masters' answers must outlast the round: the default timeout for an 8 s ttl would
    // wait 800 ms, and a busy process up to half the ttl (4 s); each way 2.1 s outlasts both.
    const a = await engine(urls, { nodeTimeoutMs: 100 });
    const lock = await a.acquire('acct-long', 5_000);
    const before = lock.remainingMs();
    for (const proxy of slowProxies) proxy.setLatency(2_100);
    try {
      await expect(lock.extend(8_000)).rejects.toBeInstanceOf(QuorumUnreachableError);
    } finally {
      for (const proxy of slowProxies) proxy.setLatency(0);
    }
    expect(lock.remainingMs()).toBeLessThanOrEqual(before);
    expect(lock.remainingMs()).toBeGreaterThan(0);
    expect(lock.signal.aborted).toBe(false);
    await lock.release();
  });

  it('in flight with a shorter ttl already counts only on the shorter deadline', async () => {
    const { urls, slowProxies } = await proxied([1, 2]);
    const a = await engine(urls);
    const lock = await a.acquire('acct-in-flight', 30_000);
    for (const proxy of slowProxies) proxy.setLatency(200);
    try {
      const extension = lock.extend(1_000).catch((e: unknown) => e);
      // The fast master may apply it now, while the round still waits for the others.
      expect(lock.remainingMs()).toBeLessThan(1_000);
      expect(() => lock.assertValid(1_000)).toThrow(LockLostError);
      await extension;
    } finally {
      for (const proxy of slowProxies) proxy.setLatency(0);
    }
    await lock.release();
  });

  it('that succeeds with a shorter ttl moves the deadline down to it', async () => {
    const a = await engine();
    const lock = await a.acquire('acct-short-ok', 30_000);
    await lock.extend(1_000);
    expect(lock.remainingMs()).toBeLessThan(1_000);
    expect(lock.remainingMs()).toBeGreaterThan(0);
    await lock.release();
  });
});
