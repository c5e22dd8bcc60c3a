import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError, Redlock } from '../../lib/index.js';
import { connectMasters, disconnectAll, FRESH_FLEET, keysOn, watchCalls } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';

// The number of resources per lock is bounded (maxResources, default 1000), refused before
// anything is sent; and no request the engine builds, even a tick's batch of the largest locks,
// can overflow the stack on its way through ioredis (auto-pipelining included).

let fleet: RedisFleet;
const opened: Redis[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterAll(async () => {
  disconnectAll(opened);
  await fleet?.stopAll();
});

async function engine(options: { maxResources?: number; nodeTimeoutMs?: number } = {}): Promise<{ redlock: Redlock; clients: Redis[] }> {
  const clients = await connectMasters(fleet.urls(), { enableAutoPipelining: true });
  opened.push(...clients);
  const redlock = new Redlock(clients, { ...FRESH_FLEET, ...options });
  await redlock.verifyMasters();
  return { redlock, clients };
}

const many = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}:${i}`);

describe('resources per lock', () => {
  it('over maxResources (default 1000) are refused with a typed error before anything is sent', async () => {
    const { redlock, clients } = await engine();
    let sent = 0;
    for (const client of clients) for (const method of ['set', 'eval', 'evalsha'] as const) watchCalls(client, method, () => sent++);
    for (const count of [1_001, 16_000]) {
      for (const call of [
        () => redlock.acquire(many(count, 'big'), 10_000),
        () => redlock.tryAcquire(many(count, 'big'), 10_000),
        () => redlock.using(many(count, 'big'), 10_000, async () => 'ran'),
      ]) {
        const error = await call().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(InvalidArgumentError);
        expect((error as InvalidArgumentError).argument).toBe('resources');
        expect((error as Error).message).toMatch(/at most 1000 resources per lock \(maxResources\)/);
      }
    }
    expect(sent).toBe(0);
    expect((await keysOn(clients)).flat()).toEqual([]);
  });

  it('follow the maxResources option, which is checked itself', async () => {
    const { redlock } = await engine({ maxResources: 2 });
    await expect(redlock.acquire(['a', 'b', 'c'], 1_000)).rejects.toThrow(/at most 2 resources/);
    const lock = await redlock.acquire(['a', 'b'], 1_000);
    await lock.release();
    for (const bad of [0, -1, 1.5, '10', Number.POSITIVE_INFINITY]) {
      expect(() => new Redlock(opened.slice(0, 3), { ...FRESH_FLEET, maxResources: bad as number })).toThrow(
        expect.objectContaining({ argument: 'maxResources' }),
      );
    }
  });

  it('at the limit, many locks acquired and released in one tick go through, and free every key', async () => {
    // A 1000-key script is slow on a loaded machine: the default node timeout (100 ms at most)
    // failed two masters' acquire rounds under double load. The test is about the bounds.
    const { redlock, clients } = await engine({ nodeTimeoutMs: 2_000 });
    // 16 locks of 1000 resources: 16,000 keys per master in one tick's releases.
    // Taken one after another: 16 such acquires at once would rightly outrun the node timeout.
    const locks = [];
    for (let i = 0; i < 16; i++) locks.push(await redlock.acquire(many(1_000, `max${i}`), 30_000));
    expect(locks.every((lock) => lock.remainingMs() > 0)).toBe(true);
    // Every release settles (some may be decided by the node timeout: 16,000 keys per master take a while).
    const released = await Promise.all(locks.map((lock) => lock.release()));
    expect(released).toHaveLength(16);
    // Decided at a quorum: a lagging master's frees may still be landing.
    await expect.poll(async () => (await keysOn(clients, 'redlock:max*')).flat().length, { timeout: 10_000 }).toBe(0);
  }, 60_000);
});
