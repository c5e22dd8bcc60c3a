import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError, LockHeldError, MAX_TTL_MS, QuorumUnreachableError, Redlock } from '../../lib/core/index.js';
import { KeyNames } from '../../lib/core/rounds/key-names.js';
import { disconnectAll, PATIENT, separateEngine } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';

// The engine options a switch from node-redlock needs: its key format (a lock key is the bare
// resource, so that both libraries exclude each other), long ttls asked for knowingly, and every
// round's outcomes on the errors and locks that node-redlock users inspect.

const PREFIXES = { keyPrefix: '', queueKeyPrefix: 'redlock-queue:', fenceKeyPrefix: 'redlock-fence:', holdersKeyPrefix: 'redlock-holders:', leaderKeyPrefix: 'redlock-leader:' };
const BARE = { ...PREFIXES, keyFormat: 'node-redlock' as const };

/** Redis Cluster's hash slot input of a key: its hash tag if it has one, else the whole key. */
function slotInput(key: string): string {
  const open = key.indexOf('{');
  const close = open === -1 ? -1 : key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}

describe("key names in node-redlock's format", () => {
  it('names the lock key by the resource alone and keeps the other names prefixed', () => {
    const names = new KeyNames(BARE, false);
    expect(names.lock('order:1')).toBe('order:1');
    expect(names.queue('order:1')).toBe('redlock-queue:order:1');
    expect(names.fence('order:1')).toBe('redlock-fence:order:1');
    expect(names.holders('order:1')).toBe('redlock-holders:order:1');
  });

  it('puts every name of a resource in the slot its bare lock key hashes to, with a Cluster voter', () => {
    const names = new KeyNames(BARE, true);
    for (const resource of ['order:1', '{redlock}a', 'a{b', 'x{user}:y', '{a}{b}']) {
      const lock = names.lock(resource);
      expect(lock).toBe(resource);
      for (const other of [names.queue(resource), names.fence(resource), names.holders(resource)]) {
        expect(slotInput(other), `${resource} → ${other}`).toBe(slotInput(lock));
      }
    }
  });

  it("refuses what would put a resource's names in two slots, or a lock key in the engine's own key space", () => {
    const names = new KeyNames(BARE, true);
    // No hash tag of its own, and a '}' that would end ours early.
    expect(() => names.lock('a}b')).toThrow(InvalidArgumentError);
    expect(() => names.lock('{}x')).toThrow(/hash tag/);
    expect(() => new KeyNames(BARE, false).lock('redlock-queue:x')).toThrow(/redlock-queue:/);
    expect(() => new KeyNames({ ...BARE, queueKeyPrefix: 'q{t}:' }, true)).toThrow(/queueKeyPrefix/);
  });

  it('is an engine option, refused with a keyPrefix or an unknown value', () => {
    expect(() => new Redlock([], { keyFormat: 'bare' as never })).toThrow(/keyFormat/);
    expect(() => new Redlock([], { keyFormat: 'node-redlock', keyPrefix: 'app:' })).toThrow(/keyPrefix/);
    expect(() => new Redlock([], { maxTtlMs: 0 })).toThrow(/maxTtlMs/);
    expect(() => new Redlock([], { maxTtlMs: 2 ** 60 })).toThrow(/maxTtlMs/);
  });
});

describe('on real masters', () => {
  let fleet: RedisFleet;
  const opened: Redis[] = [];

  beforeAll(async () => {
    fleet = await RedisFleet.start(3);
  });

  afterAll(async () => {
    disconnectAll(opened);
    await fleet?.stopAll();
  });

  it("stores the token under the bare resource, where node-redlock's acquire script looks, and leaves nothing behind", async () => {
    const { redlock, clients } = await separateEngine(fleet.urls(), opened, { ...PATIENT, keyFormat: 'node-redlock' });
    const lock = await redlock.acquire('bare:1', 5_000);
    const values = await Promise.all(clients.map((client) => client.get('bare:1')));
    expect(values.filter((value) => value === lock.token).length).toBeGreaterThanOrEqual(redlock.quorum);
    await lock.release();
    const left = await Promise.all(clients.map((client) => client.keys('*bare:1*')));
    expect(left.flat()).toEqual([]);
  });

  it("is refused a resource that a node-redlock process holds (a plain value under the bare key), with each round's outcomes", async () => {
    const { redlock, clients } = await separateEngine(fleet.urls(), opened, { ...PATIENT, keyFormat: 'node-redlock' });
    await Promise.all(clients.map((client) => client.set('bare:2', 'node-redlock-token', 'PX', 30_000)));
    const error = await redlock.acquire('bare:2', 1_000, { retryCount: 2, retryDelayMs: 5, retryJitterMs: 5, waitTimeoutMs: 10_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockHeldError);
    const held = error as LockHeldError;
    expect(held.attempts).toBe(3);
    expect(held.rounds).toHaveLength(3);
    for (const round of held.rounds) {
      expect(round).toHaveLength(3);
      expect(round.filter((outcome) => outcome.status === 'refused').length).toBeGreaterThanOrEqual(redlock.quorum);
    }
    expect(held.rounds.at(-1)).toBe(held.nodes);
    // node-redlock's lock is untouched.
    expect(await Promise.all(clients.map((client) => client.get('bare:2')))).toEqual(['node-redlock-token', 'node-redlock-token', 'node-redlock-token']);
    await Promise.all(clients.map((client) => client.del('bare:2')));
  });

  it('notices a release that wakes nobody (node-redlock deletes the key) without waiting out the holder\'s ttl', async () => {
    const { redlock, clients } = await separateEngine(fleet.urls(), opened, { ...PATIENT, keyFormat: 'node-redlock' });
    // Held "by node-redlock" for a minute: a waiter woken only by releases sleeps until the
    // holder's ttl (or its 60 s budget) runs out; one that looks again every 20-40 ms has it
    // within a few rounds of the delete. 5 s separates the two by more than a hundred rounds.
    await Promise.all(clients.map((client) => client.set('bare:3', 'node-redlock-token', 'PX', 60_000)));
    const waiting = redlock.acquire('bare:3', 2_000, { retryDelayMs: 20, retryJitterMs: 20, waitTimeoutMs: 60_000 });
    let settled = false;
    void waiting.then(
      () => (settled = true),
      () => (settled = true),
    );
    // The waiter has been refused at least once (it is queued on a master) before the delete.
    await expect.poll(async () => (await Promise.all(clients.map((client) => client.exists('redlock-queue:bare:3')))).some(Boolean)).toBe(true);
    expect(settled).toBe(false);
    await Promise.all(clients.map((client) => client.del('bare:3')));
    const lock = await Promise.race([waiting, sleep(5_000).then(() => undefined)]);
    expect(lock, 'still waiting 5 s after the delete').toBeDefined();
    expect(lock!.remainingMs()).toBeGreaterThan(0);
    await lock!.release();
  });

  it('records the rounds of the call that got a lock', async () => {
    const { redlock } = await separateEngine(fleet.urls(), opened, { ...PATIENT, keyFormat: 'node-redlock' });
    const lock = await redlock.acquire('bare:4', 5_000);
    expect(lock.rounds).toHaveLength(1);
    expect(lock.rounds[0]!.filter((outcome) => outcome.status === 'granted').length).toBeGreaterThanOrEqual(redlock.quorum);
    await lock.release();
  });

  it('refuses a ttl over 24 h unless maxTtlMs raises the cap, and a raised one outlives a timer without firing early', async () => {
    const { redlock } = await separateEngine(fleet.urls(), opened, PATIENT);
    await expect(redlock.acquire('long:1', MAX_TTL_MS + 1)).rejects.toThrow(/maxTtlMs/);
    const thirtyDays = 30 * MAX_TTL_MS;
    const { redlock: longer, clients } = await separateEngine(fleet.urls(), opened, { ...PATIENT, maxTtlMs: 60 * MAX_TTL_MS });
    const lock = await longer.acquire('long:1', thirtyDays);
    // Past 2^31 - 1 ms a Node timer fires after 1 ms: the deadline timer must re-arm instead.
    const signal = lock.signal;
    await sleep(20);
    expect(signal.aborted).toBe(false);
    const pttls = await Promise.all(clients.map((client) => client.pttl('redlock:long:1')));
    for (const pttl of pttls) expect(pttl).toBeGreaterThan(thirtyDays - 60_000);
    await lock.extend(40 * MAX_TTL_MS);
    await expect(lock.extend(61 * MAX_TTL_MS)).rejects.toThrow(/maxTtlMs/);
    expect(lock.remainingMs()).toBeGreaterThan(thirtyDays);
    await lock.release();
  });

  it('reports every round of a call that found too few masters', async () => {
    const { redlock, clients } = await separateEngine(fleet.urls(), opened, { ...PATIENT, keyFormat: 'node-redlock' });
    clients[0]!.disconnect();
    clients[1]!.disconnect();
    const error = await redlock.acquire('bare:5', 1_000, { retryDelayMs: 1, retryJitterMs: 1 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnreachableError);
    const rounds = (error as QuorumUnreachableError).rounds;
    expect(rounds.length).toBeGreaterThanOrEqual(1);
    for (const round of rounds) expect(round.filter((outcome) => outcome.status === 'error')).toHaveLength(2);
  });
});
