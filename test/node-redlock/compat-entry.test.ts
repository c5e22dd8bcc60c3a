import { inspect } from 'node:util';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockLostError } from '../../lib/core/index.js';
import Redlock, { ExecutionError, ResourceLockedError, type RedlockAbortSignal } from '../../lib/node-redlock/index.js';
import { connectMasters, disconnectAll } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';

// What nestjs-redlock/node-redlock does beyond node-redlock's own suite (test/node-redlock/vendor):
// where it keeps this package's behaviour on purpose, and what it must never show.

let fleet: RedisFleet;
let clients: Redis[];
const opened: Redis[] = [];
const FAST = { retryCount: 2, retryDelay: 10, retryJitter: 5 };

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
  clients = await connectMasters(fleet.urls());
  opened.push(...clients);
});

afterAll(async () => {
  disconnectAll(opened);
  await fleet?.stopAll();
});

describe('nestjs-redlock/node-redlock', () => {
  it("emits 'error' for every master that refused a round, as node-redlock does", async () => {
    const redlock = new Redlock(clients, FAST);
    const holder = await redlock.acquire(['events:1'], 5_000);
    const heard: Error[] = [];
    redlock.on('error', (error: Error) => heard.push(error));
    const error = await redlock.acquire(['events:1'], 5_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ExecutionError);
    const attempts = await Promise.all((error as ExecutionError).attempts);
    expect(attempts).toHaveLength(FAST.retryCount + 1);
    const against = attempts.reduce((sum, stats) => sum + stats.votesAgainst.size, 0);
    expect(against).toBeGreaterThanOrEqual(attempts.length * 2);
    expect(heard).toHaveLength(against);
    expect(heard.every((e) => e instanceof ResourceLockedError)).toBe(true);
    await holder.release();
  });

  it('leaves one listener on a client however many Redlocks are made over it (node-redlock users make one per call)', async () => {
    const before = clients.map((client) => client.listenerCount('close'));
    for (let i = 0; i < 30; i++) {
      const redlock = new Redlock(clients, FAST);
      await (await redlock.acquire([`per-call:${i}`], 1_000)).release();
    }
    const after = clients.map((client) => client.listenerCount('close'));
    after.forEach((count, index) => expect(count - before[index]!).toBeLessThanOrEqual(1));
  });

  it('refuses custom scripts instead of running other Lua than it says', () => {
    expect(() => new Redlock(clients, {}, { acquireScript: 'return 1' } as never)).toThrow(/custom scripts \(acquireScript\)/);
  });

  it('never shows the token or the clients when a lock is logged or serialised', async () => {
    const redlock = new Redlock(clients);
    const lock = await redlock.acquire(['shown:1'], 5_000);
    for (const text of [JSON.stringify(lock), inspect(lock, { depth: 10 })]) {
      expect(text).toContain('shown:1');
      expect(text).not.toContain(lock.value);
      expect(text).not.toMatch(/host|port|password|Redis/);
    }
    await lock.release();
  });

  it('releases a lock that expired meanwhile without rejecting, and refuses to extend it', async () => {
    const redlock = new Redlock(clients, FAST);
    const lock = await redlock.acquire(['expired:1'], 200);
    await expect.poll(() => lock.lock.remainingMs(), { timeout: 5_000, interval: 20 }).toBe(0);
    await expect(lock.extend(1_000)).rejects.toThrow('Cannot extend an already-expired lock.');
    const result = await lock.release();
    expect(result.attempts).toHaveLength(1);
    expect(lock.expiration).toBe(0);
  });

  it("aborts the routine's signal, with the reason in signal.error, once the lock is taken from it", async () => {
    const redlock = new Redlock(clients, FAST);
    let seen: RedlockAbortSignal | undefined;
    const done = redlock.using(['taken:1'], 1_000, { automaticExtensionThreshold: 800 }, async (signal) => {
      seen = signal;
      // Another owner overwrites the key on every master: the next extension finds it gone.
      await Promise.all(clients.map((client) => client.set('taken:1', 'someone-else', 'PX', 10_000)));
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      return signal.error;
    });
    const reason = await done;
    expect(seen?.aborted).toBe(true);
    // The engine's word for it, which comes before the extension's ExecutionError.
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).message).toMatch(/no longer holds/);
    // The other owner's key is untouched by the release that followed.
    expect(await Promise.all(clients.map((client) => client.get('taken:1')))).toEqual(['someone-else', 'someone-else', 'someone-else']);
    await Promise.all(clients.map((client) => client.del('taken:1')));
  });

  it("aborts the routine's signal when the process stalls past the lock's validity", async () => {
    const redlock = new Redlock(clients, FAST);
    let aborted = false;
    const reason = await redlock.using(['stalled:1'], 300, { automaticExtensionThreshold: 100 }, async (signal) => {
      // The process stalls (a long synchronous task) past the lock's validity: no timer runs meanwhile.
      const until = Date.now() + 500;
      while (Date.now() < until);
      await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
      aborted = signal.aborted;
      return signal.error;
    });
    expect(aborted).toBe(true);
    // The engine's deadline (LockLostError) or the extension that came too late (ExecutionError).
    expect(reason instanceof LockLostError || reason instanceof ExecutionError).toBe(true);
  });
});
