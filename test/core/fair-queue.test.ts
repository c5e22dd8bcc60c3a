import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACQUIRE_SCRIPT, RELEASE_ONE_SCRIPT, RELEASE_SCRIPT, TAKE_SCRIPT } from '../../lib/core/kinds/exclusive/exclusive-scripts.js';
import { LEAVE_SCRIPT, QUEUE_ENTRY_STAY_MS } from '../../lib/core/waiting/queue-scripts.js';
import { WAKE_CHANNEL_PREFIX } from '../../lib/core/lock/redlock-options.js';
import { SHARED_ACQUIRE_SCRIPT, SHARED_RELEASE_SCRIPT } from '../../lib/core/kinds/shared/shared-scripts.js';
import { connectMasters, disconnectAll, keysOn, PATIENT, watchCalls } from '../support/masters.js';
import { CLIENT_LIBRARIES, separateEngineOn, type ClientLibrary } from '../support/lock-clients.js';
import type { RedlockClient } from '../../lib/core/voters/clients/clients.js';
import { enlisted, heldEverywhere } from '../support/enlisted.js';
import { RedisFleet } from '../support/redis-fleet.js';

let fleet: RedisFleet;
const opened: (Redis | RedlockClient)[] = [];
/** How long the masters are paused under a waiter's refused round (well within PATIENT's node timeout). */
const SLOW_ROUND_MS = 300;

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterAll(async () => {
  disconnectAll(opened);
  await fleet?.stopAll();
});

/**
 * Counts the requests a client sends from now on that may take or free keys: takes (a plain
 * SET, a tick's take script, the acquire script) and releases, not the EVAL that repeats a
 * script call after NOSCRIPT.
 */
function countRequests(client: RedlockClient): { takes: number; releases: number } {
  const count = { takes: 0, releases: 0 };
  watchCalls(client, 'set', () => count.takes++);
  watchCalls(client, 'eval', ([source]) => {
    if (source === TAKE_SCRIPT.source) count.takes++;
  });
  watchCalls(client, 'evalsha', ([sha]) => {
    if (sha === ACQUIRE_SCRIPT.sha) count.takes++;
    if (sha === RELEASE_SCRIPT.sha || sha === RELEASE_ONE_SCRIPT.sha) count.releases++;
  });
  return count;
}

/** Calls `onRefusal` for every acquire-script reply to this client that refused the lock (and queued the caller). */
function watchRefusals(client: RedlockClient, onRefusal: () => void): void {
  watchCalls(client, 'evalsha', ([sha], reply) => {
    if (sha !== ACQUIRE_SCRIPT.sha) return;
    reply.then((r) => Array.isArray(r) && r[0] === 0 && onRefusal(), () => {});
  });
}

/** Frees `key` (queue `key:q`) with one of the two release scripts; how many keys it freed. */
type Release = (client: Redis, key: string, token: string, waiter?: string) => Promise<number>;
const RELEASES: [string, Release][] = [
  ['the release script', async (client, key, token, waiter = '') =>
    Number(((await client.eval(RELEASE_SCRIPT.source, 2, key, `${key}:q`, QUEUE_ENTRY_STAY_MS, token, waiter)) as number[])[0])],
  ['the one-key release script', async (client, key, token, waiter) =>
    Number(await client.eval(RELEASE_ONE_SCRIPT.source, 2, key, `${key}:q`, token, ...(waiter === undefined ? [] : [waiter])))],
];

/** The master's clock, in ms, as the scripts read it. */
async function nowOn(client: Redis): Promise<number> {
  const [seconds, micros] = await client.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** The deadline in a queue entry ("ticket deadline[ tag]"). */
function deadlineOf(entry: string | null): number {
  return Number(entry?.split(' ')[1]);
}

describe('queue scripts on one master', () => {
  const seed = async (client: Redis, key: string, value: string, queue: Record<string, number>) => {
    const deadline = Number((await client.time())[0]) * 1000 + 60_000;
    await client.set(key, value, 'PX', 60_000);
    for (const [waiter, ticket] of Object.entries(queue)) await client.hset(`${key}:q`, waiter, `${ticket} ${deadline}`);
  };

  describe.each(RELEASES)('%s', (name, release) => {
    const key = (base: string) => `${base}:${name.length}`;

    it('reserves the key for the lowest live ticket, for at most the entry stay', async () => {
      const [client] = await connectMasters([fleet.urls()[0]!]);
      opened.push(client!);
      const r1 = key('r1');
      await seed(client!, r1, 'tok', { late: 20, early: 10 });
      expect(await release(client!, r1, 'tok')).toBe(1);
      expect(await client!.get(r1)).toBe('~early');
      expect(await client!.pttl(r1)).toBeLessThanOrEqual(QUEUE_ENTRY_STAY_MS);
      // The head's entry lapses with the reservation unless its waiter comes back (a crashed head
      // must not stand ahead of the others until its long deadline); the others' stay as they were.
      const now = await nowOn(client!);
      expect(deadlineOf(await client!.hget(`${r1}:q`, 'early'))).toBeLessThanOrEqual(now + QUEUE_ENTRY_STAY_MS);
      expect(deadlineOf(await client!.hget(`${r1}:q`, 'late'))).toBeGreaterThan(now + 50_000);
      // A release with another token changes nothing.
      expect(await release(client!, r1, 'tok')).toBe(0);
      expect(await client!.get(r1)).toBe('~early');
    });

    it("frees a key nobody waits for, drops the holder's own entry, and never frees another owner's key", async () => {
      const [client] = await connectMasters([fleet.urls()[0]!]);
      opened.push(client!);
      const r3 = key('r3');
      await seed(client!, r3, 'tok', { holder: 10 }); // the holder's entry, left by a refusal
      expect(await release(client!, r3, 'other', 'holder')).toBe(0);
      expect(await client!.get(r3)).toBe('tok');
      expect(await client!.exists(`${r3}:q`)).toBe(0); // its entry goes even so
      expect(await release(client!, r3, 'tok')).toBe(1);
      expect(await client!.exists(r3)).toBe(0);
    });
  });

  it('a head that comes back after its reservation lapsed keeps its place: its ticket is still the lowest', async () => {
    const [client] = await connectMasters([fleet.urls()[0]!]);
    opened.push(client!);
    await seed(client!, 'slow', 'tok', { early: 10, late: 20 });
    await client!.eval(RELEASE_ONE_SCRIPT.source, 2, 'slow', 'slow:q', 'tok');
    expect(await client!.get('slow')).toBe('~early');
    // What the stay running out leaves (no sleep here): the reservation and early's entry gone.
    await client!.del('slow');
    await client!.hset('slow:q', 'early', `10 ${(await nowOn(client!)) - 1}`);
    const acquire = (token: string, waiter: string, ticket: number) =>
      client!.eval(ACQUIRE_SCRIPT.source, 2, 'slow', 'slow:q', token, 60_000, 1, waiter, ticket, QUEUE_ENTRY_STAY_MS, '', 1);
    // The next waiter is not kept out by a head that did not come...
    expect(await acquire('late-token', 'late', 20)).toEqual([1, 0]);
    // ...and the slow head, back with its ticket, is queued ahead of anyone who came after it.
    expect(((await acquire('early-token', 'early', 10)) as number[])[0]).toBe(0);
    await client!.hset('slow:q', 'later', `30 ${(await nowOn(client!)) + 60_000}`);
    await client!.eval(RELEASE_ONE_SCRIPT.source, 2, 'slow', 'slow:q', 'late-token');
    expect(await client!.get('slow')).toBe('~early');
  });

  it('a waiter leaving hands its reservation on to the next, or frees the key', async () => {
    const [client] = await connectMasters([fleet.urls()[0]!]);
    opened.push(client!);
    await seed(client!, 'r2', '~early', { early: 10, late: 20 });
    await client!.eval(LEAVE_SCRIPT.source, 3, 'r2', 'r2:q', 'r2:h', QUEUE_ENTRY_STAY_MS, 'early');
    expect(await client!.get('r2')).toBe('~late');
    await client!.eval(LEAVE_SCRIPT.source, 3, 'r2', 'r2:q', 'r2:h', QUEUE_ENTRY_STAY_MS, 'late');
    expect(await client!.exists('r2', 'r2:q')).toBe(0);
  });

  it("a reader leaving a key a writer's release gave to the readers hands it on once no reader holds there or heads the queue", async () => {
    const [client] = await connectMasters([fleet.urls()[0]!]);
    opened.push(client!);
    const now = await nowOn(client!);
    // A reader's entry left from a refusal here (it holds through the other masters), a writer
    // behind it, and another reader's: the writer's release gives the key to the readers.
    await client!.set('rw', 'writer-token', 'PX', 60_000);
    await client!.hset('rw:q', 'proc:reader', `10 ${now + 60_000} *r`, 'proc:writer', `20 ${now + 60_000}`, 'proc:late-reader', `30 ${now + 60_000} *r`);
    await client!.eval(RELEASE_ONE_SCRIPT.source, 2, 'rw', 'rw:q', 'writer-token');
    expect(await client!.get('rw')).toBe('*r');
    const leave = (waiter: string) => client!.eval(LEAVE_SCRIPT.source, 3, 'rw', 'rw:q', 'rw:h', QUEUE_ENTRY_STAY_MS, waiter);
    // A reader holding here keeps the readers' key.
    await client!.hset('rw:h', 'reader-token', `${now + 60_000} r`);
    await leave('proc:nobody');
    expect(await client!.get('rw')).toBe('*r');
    await client!.del('rw:h');
    // Nobody holds, and the reader it was kept for leaves: the writer queued next gets it at once,
    // not after the stay (before, it stayed the readers' for QUEUE_ENTRY_STAY_MS).
    await leave('proc:reader');
    expect(await client!.get('rw')).toBe('~proc:writer');
    expect(await client!.hexists('rw:q', 'proc:late-reader')).toBe(1);
  });

  it("a waiter leaving keeps the readers' key while a reader heads the queue: woken readers are on their way", async () => {
    const [client] = await connectMasters([fleet.urls()[0]!]);
    opened.push(client!);
    const now = await nowOn(client!);
    await client!.set('rw2', 'writer-token', 'PX', 60_000);
    await client!.hset('rw2:q', 'proc:r1', `10 ${now + 60_000} *r`, 'proc:r2', `11 ${now + 60_000} *r`, 'proc:w', `20 ${now + 60_000}`);
    await client!.eval(RELEASE_ONE_SCRIPT.source, 2, 'rw2', 'rw2:q', 'writer-token');
    expect(await client!.get('rw2')).toBe('*r');
    await client!.eval(LEAVE_SCRIPT.source, 3, 'rw2', 'rw2:q', 'rw2:h', QUEUE_ENTRY_STAY_MS, 'proc:r1');
    expect(await client!.get('rw2')).toBe('*r'); // r2 was woken too, and may still come
    await client!.eval(LEAVE_SCRIPT.source, 3, 'rw2', 'rw2:q', 'rw2:h', QUEUE_ENTRY_STAY_MS, 'proc:r2');
    expect(await client!.get('rw2')).toBe('~proc:w');
  });
});

describe.each(RELEASES)('wake-ups by %s', (name, release) => {
  it("name the queue's head and its runner-up on their processes' channels alone; a dead queue is told on the key's channel", async () => {
    const [client, listener] = await connectMasters([fleet.urls()[0]!, fleet.urls()[0]!]);
    opened.push(client!, listener!);
    const [w1, w2] = [`w1:${name.length}`, `w2:${name.length}`];
    const heard: [string, string][] = [];
    let markers = 0;
    listener!.on('pmessage', (_pattern: string, channel: string, message: string) => heard.push([channel, message]));
    listener!.on('message', (channel: string, message: string) => {
      if (channel === 'marker') markers++;
      else heard.push([channel, message]);
    });
    await listener!.psubscribe(`${WAKE_CHANNEL_PREFIX}*`);
    await listener!.subscribe(w1, w2, 'marker');
    // Messages to one connection arrive in order: once the marker is in, so is all before it.
    const settle = async () => {
      const expected = markers + 1;
      await client!.publish('marker', '');
      await expect.poll(() => markers).toBe(expected);
    };
    const now = Number((await client!.time())[0]) * 1000;
    await client!.set(w1, 'tok', 'PX', 60_000);
    // In an order where the runner-up is neither the first nor the last entry read.
    await client!.hset(`${w1}:q`, 'procC:1', `30 ${now + 60_000}`, 'procA:7', `10 ${now + 60_000}`, 'procB:3', `20 ${now + 60_000}`);
    await release(client!, w1, 'tok');
    await settle();
    // And the runner-up is told to look again within the stay: should the head have crashed, it is
    // the one to find out.
    expect(heard).toEqual([
      [`${WAKE_CHANNEL_PREFIX}procA`, `procA:7 ${w1}`],
      [`${WAKE_CHANNEL_PREFIX}procB`, `procB:3+${QUEUE_ENTRY_STAY_MS} ${w1}`],
    ]);
    heard.length = 0;
    await client!.set(w2, 'tok', 'PX', 60_000);
    await client!.hset(`${w2}:q`, 'procA:8', `10 ${now - 1_000}`);
    await release(client!, w2, 'tok');
    await settle();
    expect(heard).toEqual([[w2, '']]);
  });
});

describe('readers in the queue', () => {
  /** A listener on every wake channel of the fleet's first master; `settle` resolves once all published so far arrived. */
  async function listen(): Promise<{ client: Redis; heard: [string, string][]; settle: () => Promise<void> }> {
    const [client, listener] = await connectMasters([fleet.urls()[0]!, fleet.urls()[0]!]);
    opened.push(client!, listener!);
    const heard: [string, string][] = [];
    let markers = 0;
    listener!.on('pmessage', (_pattern: string, channel: string, message: string) => heard.push([channel, message]));
    listener!.on('message', () => markers++);
    await listener!.psubscribe(`${WAKE_CHANNEL_PREFIX}*`);
    await listener!.subscribe('marker');
    const settle = async () => {
      const expected = markers + 1;
      await client!.publish('marker', '');
      await expect.poll(() => markers).toBe(expected);
    };
    return { client: client!, heard, settle };
  }

  /** SHARED_ACQUIRE_SCRIPT for one reader of `key` (queue `key:q`, holders `key:h`): its reply. */
  const read = (client: Redis, key: string, token: string, waiter: string, ticket: number) =>
    client.eval(SHARED_ACQUIRE_SCRIPT.source, 3, key, `${key}:q`, `${key}:h`, token, 60_000, 1, waiter, ticket, '*r', 0, 1, '') as Promise<unknown[]>;

  describe.each(RELEASES)('freed by %s', (name, release) => {
    it('go in together: the key takes the readers\' marker, every reader ahead of the next writer is woken, and that writer told to look again', async () => {
      const { client, heard, settle } = await listen();
      const key = `readers-first:${name.length}`;
      const now = await nowOn(client);
      await client.set(key, 'tok', 'PX', 60_000);
      const far = now + 60_000;
      await client.hset(`${key}:q`, 'procA:1', `10 ${far} *r`, 'procB:2', `20 ${far} *r`, 'procC:3', `30 ${far}`, 'procD:4', `40 ${far} *r`);
      expect(await release(client, key, 'tok')).toBe(1);
      await settle();
      // Not a reservation for the first reader alone: no writer gets in, every reader may.
      expect(await client.get(key)).toBe('*r');
      expect(await client.pttl(key)).toBeLessThanOrEqual(QUEUE_ENTRY_STAY_MS);
      expect(heard.sort()).toEqual([
        [`${WAKE_CHANNEL_PREFIX}procA`, `procA:1 ${key}`],
        [`${WAKE_CHANNEL_PREFIX}procB`, `procB:2 ${key}`],
        // Should no reader come, the writer behind them finds out when their marker lapses.
        [`${WAKE_CHANNEL_PREFIX}procC`, `procC:3+${QUEUE_ENTRY_STAY_MS} ${key}`],
      ]);
      // The woken readers' entries lapse with the marker unless they come; the others' stay as they were.
      const after = await nowOn(client);
      expect(deadlineOf(await client.hget(`${key}:q`, 'procA:1'))).toBeLessThanOrEqual(after + QUEUE_ENTRY_STAY_MS);
      expect(deadlineOf(await client.hget(`${key}:q`, 'procB:2'))).toBeLessThanOrEqual(after + QUEUE_ENTRY_STAY_MS);
      expect(deadlineOf(await client.hget(`${key}:q`, 'procC:3'))).toBe(far);
      expect(deadlineOf(await client.hget(`${key}:q`, 'procD:4'))).toBe(far);
      // The second reader does not wait for the first, who has not come: readers share.
      expect((await read(client, key, 'tok-b', 'procB:2', 20))[0]).toBe(1);
      // A reader behind the writer still waits for it.
      expect(await read(client, key, 'tok-d', 'procD:4', 40)).toEqual([0, expect.any(Number)]);
    });
  });

  it('a reader waits for a writer queued ahead of it, never for a reader; its grant wakes the readers ahead of the next writer once', async () => {
    const { client, heard, settle } = await listen();
    const key = 'reader-grant';
    const far = (await nowOn(client)) + 60_000;
    await client.hset(`${key}:q`, 'procW:1', `10 ${far}`);
    expect(await read(client, key, 'tok-r', 'procR:2', 20)).toEqual([0, expect.any(Number)]);
    await client.hdel(`${key}:q`, 'procW:1');
    await client.hset(`${key}:q`, 'procA:3', `5 ${far} *r`, 'procB:4', `6 ${far} *r`, 'procW:5', `30 ${far}`, 'procC:6', `40 ${far} *r`);
    heard.length = 0;
    // Behind two readers who have not come yet: granted all the same.
    expect((await read(client, key, 'tok-r', 'procR:2', 20))[0]).toBe(1);
    await settle();
    expect(heard.sort()).toEqual([
      [`${WAKE_CHANNEL_PREFIX}procA`, `procA:3 ${key}`],
      [`${WAKE_CHANNEL_PREFIX}procB`, `procB:4 ${key}`],
    ]);
    // Woken once: the next reader's grant does not wake them again.
    heard.length = 0;
    expect((await read(client, key, 'tok-s', 'procS:7', 21))[0]).toBe(1);
    await settle();
    expect(heard).toEqual([]);
  });
});

describe.each(CLIENT_LIBRARIES)('on %s', (library: ClientLibrary) => {
  const engine = () => separateEngineOn(library, fleet.urls(), opened, PATIENT);

  describe('a released lock goes to the head of the masters\' queue', () => {
    it('is reserved for the waiter: the releaser cannot take it straight back', async () => {
      const a = await engine();
      const b = await engine();
      const held = await a.redlock.acquire('reserved', 10_000);
      await heldEverywhere(a.clients, 'redlock:reserved');
      const waiting = b.redlock.acquire('reserved', 10_000, { waitTimeoutMs: 20_000 });
      await enlisted(a.clients, 'reserved');
      await held.release();
      // The same process, nobody of its own in line: its first try is a plain SET NX, which a
      // freed key would grant. The reservation refuses it.
      expect(await a.redlock.tryAcquire('reserved', 10_000)).toBeNull();
      const lock = await waiting;
      expect(lock.remainingMs()).toBeGreaterThan(0);
      await lock.release();
    });

    it('so a process re-acquiring in a loop cannot starve a waiter of another', async () => {
      const a = await engine();
      const b = await engine();
      let cycles = 0;
      let waiterDone = false;
      const loop = (async () => {
        for (let i = 0; i < 500 && !waiterDone; i++) {
          const lock = await a.redlock.acquire('loop', 10_000, { waitTimeoutMs: 20_000 });
          cycles++;
          await lock.release();
        }
      })();
      await expect.poll(() => cycles).toBeGreaterThan(5); // the loop is running
      // The cycle count when a majority of masters had told the waiter it was queued.
      let cyclesAtEnlisting = Number.NaN;
      const refusals = { count: 0 };
      for (const client of b.lockClients) {
        watchRefusals(client, () => {
          if (++refusals.count === 2) cyclesAtEnlisting = cycles;
        });
      }
      const lock = await b.redlock.acquire('loop', 10_000, { waitTimeoutMs: 20_000 });
      waiterDone = true;
      const cyclesWhenServed = cycles;
      await lock.release();
      await loop;
      expect(cyclesWhenServed).toBeLessThan(500); // served while the loop still ran
      // Unless it slipped in between two of the loop's holds before a majority had queued it:
      const served = Number.isNaN(cyclesAtEnlisting) ? 0 : cyclesWhenServed - cyclesAtEnlisting;
      // The hold in progress when it enlisted, and at most one more already asking: the release
      // after that is reserved for the waiter. Without the reservation the loop's SET NX, sent
      // right behind its release, would win every time, for all 500 cycles.
      expect(served).toBeLessThanOrEqual(2);
    });
  });

  describe('requests of one tick', () => {
    it('share two requests per master, each lock still all its own', async () => {
      const { redlock, clients, lockClients } = await engine();
      const blocker = await engine();
      // Two of the keys are held elsewhere: the batch must refuse exactly those.
      const held = await Promise.all([blocker.redlock.acquire('tick-3', 10_000), blocker.redlock.acquire('tick-7', 10_000)]);
      const counts = lockClients.map(countRequests);
      const locks = await Promise.all(Array.from({ length: 40 }, (_, i) => redlock.tryAcquire(`tick-${i}`, 10_000)));
      expect(locks.map((lock, i) => (lock === null ? i : -1)).filter((i) => i >= 0)).toEqual([3, 7]);
      // The first take at once, the other 39 in one call: not 40. Then the refused ones' cleanup.
      for (const count of counts) expect(count.takes).toBe(2);
      for (const count of counts) expect(count.releases).toBeLessThanOrEqual(2);
      for (const lock of locks) {
        if (!lock) continue;
        // Decided at a quorum: the last master may still be applying its part of the batch.
        const values = () => Promise.all(clients.map((c) => c.get(lock.keys[0]!)));
        await expect.poll(values).toEqual([lock.token, lock.token, lock.token]);
      }
      const before = counts.map((count) => count.releases);
      await Promise.all(locks.map((lock) => lock?.release()));
      counts.forEach((count, index) => expect(count.releases - before[index]!).toBe(2));
      await Promise.all(held.map((lock) => lock.release()));
      await expect.poll(async () => (await keysOn(clients, 'redlock:tick-*')).flat()).toEqual([]);
    });

    it('sends the first at once and the rest together at the end of the tick, in the order made', async () => {
      const { redlock, lockClients: clients } = await engine();
      const held = await redlock.acquire('order-held', 10_000);
      const log: string[] = [];
      watchCalls(clients[0]!, 'set', ([key]) => log.push(`take ${key}`));
      watchCalls(clients[0]!, 'eval', ([source, count, ...rest]) => {
        if (source === TAKE_SCRIPT.source) log.push(`takes ${rest.slice(0, Number(count)).join(' ')}`);
      });
      watchCalls(clients[0]!, 'evalsha', ([sha, , key]) => {
        if (sha === RELEASE_ONE_SCRIPT.sha) log.push(`release ${key}`);
      });
      const first = redlock.tryAcquire('order-a', 10_000);
      expect(log).toEqual(['take redlock:order-a']); // sent before the caller even awaits
      const later = [redlock.tryAcquire('order-b', 10_000), redlock.tryAcquire('order-c', 10_000), held.release()];
      expect(log).toHaveLength(1);
      await new Promise<void>((resolve) => process.nextTick(resolve));
      expect(log).toEqual(['take redlock:order-a', 'takes redlock:order-b redlock:order-c', 'release redlock:order-held']);
      // The tick is over: the next request goes at once again, behind the batch on the connection.
      later.push(redlock.tryAcquire('order-d', 10_000));
      expect(log.at(-1)).toBe('take redlock:order-d');
      const locks = [await first, ...(await Promise.all(later))];
      for (const lock of locks) if (lock && 'token' in lock) await lock.release();
    });
  });

  describe("a waiter's rounds", () => {
    it('a refused attempt sends its cleanup only where it was not refused', async () => {
      const a = await engine();
      const b = await engine();
      const held = await a.redlock.acquire('refused-everywhere', 10_000);
      const counts = b.lockClients.map(countRequests);
      // A plain SET NX, refused by every master: its cleanup goes out when the round is decided,
      // to the one master (of 3, quorum 2) that may not have answered by then, never to the others.
      expect(await b.redlock.tryAcquire('refused-everywhere', 10_000)).toBeNull();
      const afterTake = counts.map((count) => count.releases);
      expect(afterTake.reduce((sum, n) => sum + n, 0)).toBeLessThanOrEqual(1);
      // The acquire script (a fenced try), refused by every master: its cleanup waits for each
      // master's answer, and none goes to a master that refused.
      expect(await b.redlock.tryAcquire('refused-everywhere', 10_000, { fencing: true })).toBeNull();
      expect(counts.map((count, i) => ({ takes: count.takes, releases: count.releases - afterTake[i]! }))).toEqual(
        b.clients.map(() => ({ takes: 2, releases: 0 })),
      );
      await held.release();
    });

    it('a waiter listening before its round sleeps until a quorum of masters names it: one refused round, one that wins', async () => {
      const a = await engine();
      const b = await engine();
      // A first wait in b's process joins its channel on every master; from then on a waiter listens before its round.
      const warm = await a.redlock.acquire('warm-up', 10_000);
      await heldEverywhere(a.clients, 'redlock:warm-up');
      const warming = b.redlock.acquire('warm-up', 10_000, { waitTimeoutMs: 20_000 });
      await enlisted(a.clients, 'warm-up');
      await warm.release();
      await (await warming).release();

      // A semaphore: every round is the script, so each is counted the same way on every master.
      const permits = [await a.redlock.acquire('wake-quorum', 10_000, { limit: 2 }), await a.redlock.acquire('wake-quorum', 10_000, { limit: 2 })];
      await heldEverywhere(a.clients, 'redlock-holders:wake-quorum', 2);
      const rounds = b.lockClients.map((client) => {
        const count = { value: 0 };
        watchCalls(client, 'evalsha', ([sha]) => {
          if (sha === SHARED_ACQUIRE_SCRIPT.sha) count.value++;
        });
        return count;
      });
      // b's refused round is made slow (every master paused while it is out), and the waiter waits
      // for the others' wake-ups at most as long as that round took after the first: so a loaded
      // machine's gap between the masters' messages cannot send it round early (CI under double load
      // saw 3 rounds when its round took a few ms). Its round time is all it learns from the pause.
      fleet.nodes.forEach((_, i) => fleet.pause(i));
      const waiting = b.redlock.acquire('wake-quorum', 10_000, { limit: 2, waitTimeoutMs: 20_000 });
      try {
        await new Promise((resolve) => setTimeout(resolve, SLOW_ROUND_MS));
      } finally {
        fleet.nodes.forEach((_, i) => fleet.resume(i));
      }
      await enlisted(a.clients, 'wake-quorum');
      // The holders keep both permits a while: a waiter that retried at once (it did, before it
      // listened ahead of its round) would have sent a second round by now.
      await new Promise((resolve) => setTimeout(resolve, 200));
      await permits[0]!.release();
      const permit = await waiting;
      expect(rounds.map((count) => count.value)).toEqual(b.clients.map(() => 2));
      await Promise.all([permit.release(), permits[1]!.release()]);
    });
  });
});
