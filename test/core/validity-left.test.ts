import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QuorumUnreachableError, Redlock } from '../../lib/index.js';
import { connectMasters, disconnectAll, FRESH_FLEET, keysOn } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { TcpProxy } from '../support/tcp-proxy.js';

// Validity counts from before the round was sent, so a slow round spends it twice over: once in
// `ttl - elapsed - drift`, and again because that much time has already gone by when the round
// ends. A lock whose validity is positive but already used up must not be handed out (found by
// the safety suite's latency scenario: test/safety/latency.test.ts).

const ONE_WAY_MS = 100; // every master answers after one 200 ms round trip

let fleet: RedisFleet;
let proxies: TcpProxy[] = [];
let slow: Redis[] = [];
let direct: Redis[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
  proxies = await Promise.all(fleet.nodes.map((node) => TcpProxy.start({ host: node.host, port: node.port })));
  slow = await connectMasters(proxies.map((proxy) => proxy.url));
  direct = await connectMasters(fleet.urls());
  // Load the scripts first, so each round below is one EVALSHA round trip (not NOSCRIPT + EVAL).
  const warm = new Redlock(direct, { ...FRESH_FLEET, logger: { warn: () => {} } });
  await (await warm.acquire('warm-up', 1_000)).release();
  for (const proxy of proxies) proxy.setLatency(ONE_WAY_MS);
});

afterAll(async () => {
  disconnectAll([...slow, ...direct]);
  await Promise.all(proxies.map((proxy) => proxy.close()));
  await fleet?.stopAll();
});

describe('a round slower than half the ttl', () => {
  it('fails instead of handing out a lock that has already run out', async () => {
    const redlock = new Redlock(slow, { ...FRESH_FLEET, nodeTimeoutMs: 2_000, logger: { warn: () => {} } });
    // ttl 300: validity = 300 - ~200 - 5 is still positive, but ~200 ms of it are gone already.
    const error = await redlock.acquire('spent', 300, { retryCount: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnreachableError);
    expect((error as Error).message).toMatch(/no validity/);
    // The failed round was cleaned up on every master before acquire gave up.
    await expect.poll(async () => (await keysOn(direct, 'redlock:*')).flat()).toEqual([]);
  });

  it('still hands out a lock with validity to spare, and says how much is left', async () => {
    const redlock = new Redlock(slow, { ...FRESH_FLEET, nodeTimeoutMs: 2_000, logger: { warn: () => {} } });
    const started = performance.now();
    const lock = await redlock.acquire('enough', 2_000, { retryCount: 0 });
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(2 * ONE_WAY_MS);
    expect(lock.remainingMs()).toBeGreaterThan(0);
    expect(lock.remainingMs()).toBeLessThanOrEqual(2_000 - 22 - elapsed);
    await lock.release();
  });
});
