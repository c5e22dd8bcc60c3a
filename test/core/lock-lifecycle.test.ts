import { once } from 'node:events';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  AcquireAbortedError,
  ExtensionLimitError,
  LockHeldError,
  LockLostError,
  Redlock,
} from '../../lib/index.js';
import { connectMasters, disconnectAll, FRESH_FLEET, keysOn, PATIENT } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';

let fleet: RedisFleet;
let clients: Redis[];
let redlock: Redlock;

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
  clients = await connectMasters(fleet.urls());
  // A node timeout that rides out a starved machine: these tests are about the lock, not about slow masters.
  redlock = new Redlock(clients, { ...FRESH_FLEET, nodeTimeoutMs: 1_000 });
});

beforeEach(async () => {
  await Promise.all(clients.map((c) => c.flushall()));
});

afterAll(async () => {
  disconnectAll(clients ?? []);
  await fleet?.stopAll();
});

/** Simulates expiry followed by another owner taking the key on every master. */
async function takeOver(key: string, token: string): Promise<void> {
  await Promise.all(clients.map((c) => c.set(key, token, 'PX', 60_000)));
}

describe('validity', () => {
  it('is the ttl less the round and the drift, on the monotonic clock', async () => {
    const before = performance.now();
    const lock = await redlock.acquire('validity', 10_000);
    const after = performance.now();
    const drift = Math.round(10_000 * 0.01) + 2;
    expect(lock.remainingMs()).toBeLessThanOrEqual(10_000 - drift);
    // The deadline counts from before the round was sent: at most two round-lengths have gone.
    expect(lock.remainingMs()).toBeGreaterThan(10_000 - drift - 2 * (performance.now() - before));
    expect(after).toBeGreaterThan(before);
    await lock.release();
    expect(lock.remainingMs()).toBe(0);
  });

  it('never returns a lock whose validity the round already used up', async () => {
    // A drift factor that eats almost all of the ttl leaves nothing once the round's time is taken.
    const slow = new Redlock(clients, { ...FRESH_FLEET, driftFactor: 0.49, nodeTimeoutMs: 1_000 });
    await expect(slow.acquire('exhausted', 4, { retryCount: 0 })).rejects.toThrow(/no validity/);
    await expect.poll(async () => (await keysOn(clients)).flat()).toEqual([]);
  });
});

describe('release', () => {
  it('never deletes a key that holds another token, and does not throw', async () => {
    const lock = await redlock.acquire('taken-over', 5_000);
    await takeOver('redlock:taken-over', 'new-owner');
    const result = await lock.release();
    expect(result.heldUntilRelease).toBe(false);
    expect(result.releasedOn).toBe(0);
    await expect.poll(() => result.nodes.map((n) => n.status)).toEqual(['refused', 'refused', 'refused']);
    expect(await Promise.all(clients.map((c) => c.get('redlock:taken-over')))).toEqual(['new-owner', 'new-owner', 'new-owner']);
  });

  it('of an expired lock reports it and crashes nothing', async () => {
    const lock = await redlock.acquire('expires', 5_000);
    await Promise.all(clients.map((c) => c.pexpire('redlock:expires', 1)));
    await expect.poll(async () => (await keysOn(clients)).flat()).toEqual([]);
    const result = await lock.release();
    expect(result.heldUntilRelease).toBe(false);
  });

  it('is idempotent', async () => {
    const lock = await redlock.acquire('twice', 5_000);
    const first = await lock.release();
    expect(await lock.release()).toBe(first);
    expect(first.releasedOn).toBeGreaterThanOrEqual(redlock.quorum);
  });
});

describe('extend', () => {
  it('recomputes validity and pushes the keys expiry', async () => {
    const lock = await redlock.acquire('extend', 1_000);
    await lock.extend(20_000);
    // Far beyond the 1 s it was taken for; how far exactly depends on the machine's load.
    expect(lock.remainingMs()).toBeGreaterThan(10_000);
    expect(lock.ttlMs).toBe(20_000);
    // Decided at a quorum: the last master may still be applying it.
    const pttls = await Promise.all(clients.map((c) => c.pttl('redlock:extend')));
    expect(pttls.filter((pttl) => pttl > 10_000).length).toBeGreaterThanOrEqual(2);
    await lock.release();
  });

  it('never touches a key that holds another token', async () => {
    const lock = await redlock.acquire('extend-foreign', 5_000);
    await Promise.all(clients.map((c) => c.set('redlock:extend-foreign', 'new-owner', 'PX', 3_000)));
    const error = await lock.extend(60_000).catch((e) => e);
    expect(error).toBeInstanceOf(LockLostError);
    expect(error.code).toBe('LOCK_LOST');
    for (const pttl of await Promise.all(clients.map((c) => c.pttl('redlock:extend-foreign')))) {
      expect(pttl).toBeLessThanOrEqual(3_000);
    }
  });

  it('on a multi-resource lock, extends nothing on a master where one key was taken over', async () => {
    const lock = await redlock.acquire(['ma', 'mb'], 5_000);
    await clients[0]!.set('redlock:mb', 'new-owner', 'PX', 3_000);
    await lock.extend(60_000);
    expect(await clients[0]!.pttl('redlock:ma')).toBeLessThanOrEqual(5_000);
    expect(await clients[1]!.pttl('redlock:ma')).toBeGreaterThan(5_000);
    await lock.release();
  });

  it('is bounded', async () => {
    const capped = new Redlock(clients, { ...FRESH_FLEET, ...PATIENT, maxExtensions: 2 });
    const lock = await capped.acquire('capped', 5_000);
    await lock.extend();
    await lock.extend();
    const error = await lock.extend().catch((e) => e);
    expect(error).toBeInstanceOf(ExtensionLimitError);
    expect(error.code).toBe('EXTENSION_LIMIT');
    await lock.release();
  });

  it('refuses to revive a released lock', async () => {
    const lock = await redlock.acquire('revive', 5_000);
    await lock.release();
    await expect(lock.extend()).rejects.toBeInstanceOf(LockLostError);
    await expect.poll(async () => (await keysOn(clients)).flat()).toEqual([]);
  });
});

describe('acquire and tryAcquire', () => {
  it('tryAcquire returns null while another owner holds the lock', async () => {
    const lock = await redlock.acquire('try', 5_000);
    expect(await redlock.tryAcquire('try', 5_000)).toBeNull();
    await lock.release();
    const next = await redlock.tryAcquire('try', 5_000);
    expect(next).not.toBeNull();
    await next!.release();
  });

  it('waits for the holder and gets the lock when it is released', async () => {
    const holder = await redlock.acquire('wait', 5_000);
    // Another process: a caller of this one would be handed the holder's lock without the masters.
    const otherProcess = new Redlock(clients, { ...FRESH_FLEET, ...PATIENT });
    // Identified before its first round, so its takes all go out at once, as a long-lived engine's do.
    await otherProcess.verifyMasters();
    const waiting = otherProcess.acquire('wait', 5_000, { waitTimeoutMs: 20_000 });
    await holder.release();
    const lock = await waiting;
    otherProcess.close();
    // Woken by the first master's release, it may win before the last master processed it.
    const values = () => Promise.all(clients.map((c) => c.get('redlock:wait')));
    expect((await values()).filter((v) => v === lock.token).length).toBeGreaterThanOrEqual(2);
    await expect.poll(values).not.toContain(holder.token);
    await lock.release();
  });

  it('gives up after the wait budget with the held error', async () => {
    const holder = await redlock.acquire('budget', 5_000);
    const otherProcess = new Redlock(clients, { ...FRESH_FLEET, ...PATIENT });
    // Identified before its first round, so its takes all go out at once, as a long-lived engine's do.
    await otherProcess.verifyMasters();
    const error = await otherProcess.acquire('budget', 5_000, { waitTimeoutMs: 150 }).catch((e) => e);
    expect(error).toBeInstanceOf(LockHeldError);
    expect(error.attempts).toBeGreaterThan(1);
    await holder.release();
  });

  it('stops waiting when its AbortSignal fires, holding nothing', async () => {
    const holder = await redlock.acquire('abort', 5_000);
    const controller = new AbortController();
    const waiting = redlock.acquire('abort', 5_000, { signal: controller.signal, waitTimeoutMs: 60_000 });
    controller.abort(new Error('client went away'));
    const error = await waiting.catch((e) => e);
    expect(error).toBeInstanceOf(AcquireAbortedError);
    expect(error.code).toBe('ACQUIRE_ABORTED');
    await expect.poll(() => Promise.all(clients.map((c) => c.get('redlock:abort')))).toEqual([holder.token, holder.token, holder.token]);
    await holder.release();
  });

  it('stops waiting when its AbortSignal fires while it sleeps for a release, or while in the local line', async () => {
    const otherProcess = new Redlock(clients, { ...FRESH_FLEET, ...PATIENT });
    // Identified before its first round, so its takes all go out at once, as a long-lived engine's do.
    await otherProcess.verifyMasters();
    // Held for a minute: a waiter deaf to its signal would sleep past the test's timeout.
    const holder = await otherProcess.acquire('abort-asleep', 60_000);
    const sleeper = new AbortController();
    const sleeping = redlock.acquire('abort-asleep', 60_000, { signal: sleeper.signal, waitTimeoutMs: 120_000 });
    await expect.poll(() => clients[0]!.hlen('redlock-queue:abort-asleep'), { interval: 10 }).toBe(1);
    // Behind the sleeper in this process's line, it has not asked the masters at all.
    const inLine = new AbortController();
    const lined = redlock.acquire('abort-asleep', 60_000, { signal: inLine.signal, waitTimeoutMs: 120_000 });
    inLine.abort(new Error('client went away'));
    expect(await lined.catch((e) => e)).toBeInstanceOf(AcquireAbortedError);
    sleeper.abort(new Error('client went away'));
    expect(await sleeping.catch((e) => e)).toBeInstanceOf(AcquireAbortedError);
    // The sleeper's queue entry goes with it, and the holder's keys are untouched.
    await expect.poll(() => clients[0]!.hlen('redlock-queue:abort-asleep'), { interval: 10 }).toBe(0);
    // The holder's engine settled at a quorum: a lagging master may have been taken by the sleeper's
    // first round meanwhile (then freed again), so a quorum holds the holder's token and no master
    // holds anyone else's.
    const values = await Promise.all(clients.map((c) => c.get('redlock:abort-asleep')));
    expect(values.filter((value) => value === holder.token).length).toBeGreaterThanOrEqual(2);
    expect(values.filter((value) => value !== holder.token && value !== null)).toEqual([]);
    await holder.release();
  });

  it('keeps resource names out of the script: quotes and brackets are just bytes', async () => {
    const odd = `x'"]]..--[[\n${'\u{1F512}'}`;
    const lock = await redlock.acquire(odd, 5_000);
    expect(await clients[0]!.get(`redlock:${odd}`)).toBe(lock.token);
    await lock.release();
  });

  it('uses the configured key prefix', async () => {
    const prefixed = new Redlock(clients, { ...FRESH_FLEET, ...PATIENT, keyPrefix: 'app:locks:' });
    // Identified before its first round, so its takes all go out at once, as a long-lived engine's do.
    await prefixed.verifyMasters();
    const lock = await prefixed.acquire('order:1', 5_000);
    expect(lock.keys).toEqual(['app:locks:order:1']);
    // Polled: granted at a quorum, master 1 may still be setting its key.
    await expect.poll(() => clients[1]!.get('app:locks:order:1')).toBe(lock.token);
    await lock.release();
  });

  it('uses a token of at least 128 bits, different every time', async () => {
    const tokens = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const lock = await redlock.acquire('tokens', 5_000);
      tokens.add(lock.token);
      expect(Buffer.from(lock.token, 'base64url').length).toBeGreaterThanOrEqual(16);
      await lock.release();
    }
    expect(tokens.size).toBe(20);
  });
});

describe('using', () => {
  it('returns the routine value and releases afterwards', async () => {
    const value = await redlock.using('using', 5_000, async (signal, lock) => {
      expect(signal.aborted).toBe(false);
      expect(await clients[0]!.get('redlock:using')).toBe(lock.token);
      return 42;
    });
    expect(value).toBe(42);
    await expect.poll(async () => (await keysOn(clients)).flat()).toEqual([]);
  });

  it('releases when the routine throws', async () => {
    await expect(redlock.using('throws', 5_000, async () => {
      throw new Error('boom');
    })).rejects.toThrow('boom');
    await expect.poll(async () => (await keysOn(clients)).flat()).toEqual([]);
  });

  it('extends the lock while the routine outlives its ttl', async () => {
    // A ttl of 1 s: extended every half second, and a loaded machine's stalls stay well inside it.
    await redlock.using('long', 1_000, async (signal, lock) => {
      // Wait for two extensions by watching the keys' expiry move, not the clock.
      await expect.poll(() => lock.extensions, { timeout: 10_000, interval: 20 }).toBeGreaterThanOrEqual(2);
      expect(signal.aborted).toBe(false);
      expect(await redlock.tryAcquire('long', 1_000)).toBeNull();
    });
    await expect.poll(async () => (await keysOn(clients)).flat()).toEqual([]);
  });

  it('aborts its signal with the reason when the lock is lost', async () => {
    await redlock.using('lost', 300, async (signal, lock) => {
      await takeOver('redlock:lost', 'thief');
      // A 300 ms lock may be lost (its extension refused) while takeOver's writes are out.
      if (!signal.aborted) await once(signal, 'abort');
      expect(signal.reason).toBeInstanceOf(LockLostError);
      expect(() => lock.assertValid()).toThrow(LockLostError);
      expect(lock.remainingMs()).toBe(0);
    });
    expect(await clients[0]!.get('redlock:lost')).toBe('thief');
  });

  it('is reentrant: a nested call for held resources neither re-acquires nor releases early', async () => {
    await redlock.using('outer', 5_000, async (_signal, outer) => {
      const inner = await redlock.using('outer', 5_000, async (_s, lock) => lock);
      expect(inner).toBe(outer);
      expect(await clients[0]!.get('redlock:outer')).toBe(outer.token);

      // Asking for held and new resources takes only the new one, and releases only that.
      await redlock.using(['outer', 'extra'], 5_000, async (_s, lock) => {
        expect(lock.resources).toEqual(['extra']);
        expect(await clients[0]!.get('redlock:extra')).toBe(lock.token);
      });
      expect(await clients[0]!.get('redlock:extra')).toBeNull();
      expect(await clients[0]!.get('redlock:outer')).toBe(outer.token);
    });
  });

  it('releaseAll fires the signals of running work and releases their locks', async () => {
    const engine = new Redlock(clients, { ...FRESH_FLEET, ...PATIENT });
    const forgotten = await engine.acquire('lost-and-forgotten', 1_000);
    await takeOver('redlock:lost-and-forgotten', 'thief');
    await expect(forgotten.extend()).rejects.toBeInstanceOf(LockLostError);
    expect(forgotten.signal.aborted).toBe(true);
    expect(forgotten.remainingMs()).toBe(0);
    let seen: unknown;
    const running = engine.using('shutdown', 5_000, async (signal) => {
      await once(signal, 'abort');
      seen = signal.reason;
    });
    await expect.poll(() => engine.heldLocks.size).toBe(1); // the lost one is no longer counted
    await engine.releaseAll();
    await running;
    expect(seen).toBeInstanceOf(LockLostError);
    // The release of 'shutdown' settled at a quorum; the last master may still be freeing it.
    const lostOnly = ['redlock:lost-and-forgotten', 'redlock:lost-and-forgotten', 'redlock:lost-and-forgotten'];
    await expect.poll(async () => (await keysOn(clients)).flat()).toEqual(lostOnly);
    expect(await clients[0]!.get('redlock:lost-and-forgotten')).toBe('thief');
    expect(engine.heldLocks.size).toBe(0);
  });
});
