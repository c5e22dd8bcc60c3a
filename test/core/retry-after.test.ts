import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LockHeldError, Redlock } from '../../lib/index.js';
import { disconnectAll, separateEngine } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';

// A caller that will not wait takes no place in the masters' queues, and what it is told to wait
// (retryAfterMs, HTTP Retry-After) never exceeds what the holder's lock can still run.

let fleet: RedisFleet;
const opened: Redis[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterAll(async () => {
  disconnectAll(opened);
  await fleet?.stopAll();
});

it('200 staggered callers that will not wait are told at most the holder\'s remaining time, and leave no queue entry', async () => {
  const holderEngine = await separateEngine(fleet.urls(), opened);
  // A generous node timeout: on a loaded box a round can outlast the default 100 ms, and this
  // test is about what a refused caller is told, not about slow masters.
  const { redlock: callers, clients } = await separateEngine(fleet.urls(), opened, { nodeTimeoutMs: 2_000 });
  const holder = await holderEngine.redlock.acquire('acct', 5_000);
  // The masters set the holder's key a little apart (more so on a loaded box), and each caller
  // hears the longest PTTL among the masters that answered it first: what it is told may go up
  // by that much from one caller to the next. Each master's expiry is placed on this process's
  // clock between the instants its PTTL was asked and answered, so that a slow reply widens the
  // allowance instead of hiding part of the spread (two flakes under load came from reading the
  // spread as PTTLs taken at different moments).
  const expiries = await Promise.all(
    clients.map(async (client) => {
      const asked = performance.now();
      const pttl = await client.pttl('redlock:acct');
      return { earliest: asked + pttl, latest: performance.now() + pttl };
    }),
  );
  const apart = Math.max(...expiries.map((e) => e.latest)) - Math.min(...expiries.map((e) => e.earliest));
  // One caller of another process that does wait is in line too, as in real traffic.
  const patientEngine = await separateEngine(fleet.urls(), opened);
  const patient = patientEngine.redlock.acquire('acct', 5_000, { waitTimeoutMs: 20_000 });
  try {
    const told: number[] = [];
    for (let i = 0; i < 200; i++) {
      // Fenced, so each takes the scripted path that can queue (a plain SET NX never does).
      const call =
        i % 2 === 0
          ? callers.acquire('acct', 5_000, { retryCount: 0, fencing: true })
          : callers.tryAcquire('acct', 5_000, { fencing: true });
      const outcome = await call.catch((e: unknown) => e);
      if (i % 2 === 0) {
        expect(outcome).toBeInstanceOf(LockHeldError);
        const retryAfterMs = (outcome as LockHeldError).retryAfterMs!;
        expect(retryAfterMs).toBeLessThanOrEqual(holder.ttlMs);
        told.push(retryAfterMs);
      } else {
        expect(outcome).toBeNull();
      }
      await sleep(3);
    }
    // Never more than the holder's key has left: it only goes down as time passes.
    expect(told.every((ms, i) => i === 0 || ms <= told[i - 1]! + apart + 5)).toBe(true);
    // The queues hold the patient waiter's entry alone.
    const entries = await Promise.all(clients.map((client) => client.hkeys('redlock-queue:acct')));
    expect(entries.every((ids) => ids.length <= 1)).toBe(true);
  } finally {
    await holder.release();
    await (await patient).release();
  }
});

it('a caller that will not wait, behind a waiter of its own process, is told when the local holder\'s lock ends', async () => {
  const { redlock } = await separateEngine(fleet.urls(), opened);
  const holder = await redlock.acquire('local-line', 5_000);
  // Waits behind the holder in this process's line for the resource.
  const patient = redlock.acquire('local-line', 5_000, { waitTimeoutMs: 20_000 });
  try {
    // The holder's remaining time, read at some instant of the call: between the two readings.
    const before = holder.remainingMs();
    const error = await redlock.acquire('local-line', 5_000, { retryCount: 0 }).catch((e: unknown) => e);
    const after = holder.remainingMs();
    expect(error).toBeInstanceOf(LockHeldError);
    expect(after).toBeGreaterThan(0);
    expect((error as LockHeldError).retryAfterMs).toBeLessThanOrEqual(before);
    expect((error as LockHeldError).retryAfterMs).toBeGreaterThanOrEqual(after);
  } finally {
    await holder.release();
    await (await patient).release();
  }
});
