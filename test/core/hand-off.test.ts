import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { validityMs } from '../../lib/core/base/clock.js';
import { HandOffGrants, type Confirmation } from '../../lib/core/waiting/hand-off-grants.js';
import { ACQUIRE_SCRIPT, RELEASE_ONE_SCRIPT } from '../../lib/core/kinds/exclusive/exclusive-scripts.js';
import { LEAVE_SCRIPT, QUEUE_ENTRY_STAY_MS } from '../../lib/core/waiting/queue-scripts.js';
import { WAKE_CHANNEL_PREFIX } from '../../lib/core/lock/redlock-options.js';
import type { RoundResult } from '../../lib/core/rounds/quorum-round.js';
import { RedisNode } from '../../lib/core/voters/redis-node.js';
import type { Redlock } from '../../lib/core/redlock.js';
import { connectMasters, disconnectAll, PATIENT, watchCalls } from '../support/masters.js';
import { CLIENT_LIBRARIES, connectLockClients, dropConnection, separateEngineOn, untilLockClientReady, type ClientLibrary } from '../support/lock-clients.js';
import type { RedlockClient } from '../../lib/core/voters/clients/clients.js';
import { enlisted, heldEverywhere } from '../support/enlisted.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { masterClientOf } from '../../lib/core/voters/clients/clients.js';

// Server-side hand-off (docs/GUARANTEES.md): a release that frees a key grants it to the head
// of the masters' queue, so a turn between processes costs the waiter no round of its own.

let fleet: RedisFleet;
const opened: (Redis | RedlockClient)[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterAll(async () => {
  disconnectAll(opened);
  await fleet?.stopAll();
});

/** Counts, per master, the acquire scripts a client sends from now on. */
function countAcquires(clients: readonly RedlockClient[]): number[] {
  const counts = clients.map(() => 0);
  clients.forEach((client, index) =>
    watchCalls(client, 'evalsha', ([sha]) => {
      if (sha === ACQUIRE_SCRIPT.sha) counts[index]!++;
    }),
  );
  return counts;
}

/**
 * A first wait joins the waiter's process channel on every master; until then a refused waiter
 * retries at once, in case a release came before it listened. Later waiters listen before their round.
 */
async function warmUp(holder: Redlock, waiter: Redlock, clients: readonly Redis[], resource: string): Promise<void> {
  const warm = await holder.acquire(resource, 10_000);
  await heldEverywhere(clients, `redlock:${resource}`);
  const warming = waiter.acquire(resource, 10_000, { waitTimeoutMs: 20_000 });
  await enlisted(clients, resource);
  await warm.release();
  await (await warming).release();
}

describe('hand-off scripts on one master', () => {
  /** A hand-off waiter's queue entry, as the acquire script writes it. */
  const entry = (ticket: number, deadline: number, token: string, ttl: number, stamp: number, anchor: number) =>
    `${ticket} ${deadline} =${token} ${ttl} ${stamp} ${anchor}`;
  const nowOn = async (client: Redis) => {
    const [seconds, micros] = await client.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  };

  it('skips a dead head, grants the live one its token and ttl, and tells it how long ago its entry was written', async () => {
    const [client] = await connectMasters([fleet.urls()[0]!]);
    opened.push(client!);
    const sub = (await connectMasters([fleet.urls()[0]!]))[0]!;
    opened.push(sub);
    const messages: string[] = [];
    await sub.subscribe(`${WAKE_CHANNEL_PREFIX}proc`);
    sub.on('message', (_channel, message) => messages.push(message));
    const now = await nowOn(client!);
    await client!.set('h1', 'holder', 'PX', 60_000);
    await client!.hset('h1:q', 'proc:dead', entry(1, now - 10, 'dead.1', 5_000, now - 500, 1));
    await client!.hset('h1:q', 'proc:live', entry(2, now + 60_000, 'live.3', 7_000, now - 200, 3));
    await client!.hset('h1:q', 'proc:late', entry(3, now + 60_000, 'late.1', 7_000, now, 1));
    expect(await client!.eval(RELEASE_ONE_SCRIPT.source, 2, 'h1', 'h1:q', 'holder', '', QUEUE_ENTRY_STAY_MS)).toBe(1);
    expect(await client!.get('h1')).toBe('live.3');
    const pttl = await client!.pttl('h1');
    expect(pttl).toBeGreaterThan(6_000);
    expect(pttl).toBeLessThanOrEqual(7_000);
    // The granted entry and the dead one are gone; the next waiter stays queued.
    expect((await client!.hkeys('h1:q')).sort()).toEqual(['proc:late']);
    await expect.poll(() => messages.length).toBe(1);
    const [head, key] = messages[0]!.split(' ');
    const [id, anchor, elapsed, server] = head!.split('/');
    expect([id, anchor, key]).toEqual(['proc:live', '3', 'h1']);
    // The granting server names itself: one server reached under two names must count once.
    expect(server).toBe(/run_id:(\w+)/.exec(await client!.info('server'))![1]);
    expect(Number(elapsed)).toBeGreaterThanOrEqual(200);
    expect(Number(elapsed)).toBeLessThan(5_000);
    sub.disconnect();
  });

  it("a waiter's later round takes over a key granted to an earlier token of its own; another's it waits for", async () => {
    const [client] = await connectMasters([fleet.urls()[0]!]);
    opened.push(client!);
    const acquire = (token: string, prefix: string, anchor: number) =>
      client!.eval(ACQUIRE_SCRIPT.source, 2, 'h2', 'h2:q', token, 10_000, 1, 'proc:me', 5, QUEUE_ENTRY_STAY_MS, prefix, anchor);
    await client!.set('h2', 'mine.1', 'PX', 60_000);
    expect(await acquire('mine.2', 'mine.', 2)).toEqual([1, 0]);
    expect(await client!.get('h2')).toBe('mine.2');
    expect(await client!.pttl('h2')).toBeLessThanOrEqual(10_000);
    // Someone else's token: refused, and the entry it leaves carries the grant a release would make.
    expect(await acquire('other.1', 'other.', 1)).toEqual([0, expect.any(Number)]);
    const written = await client!.hget('h2:q', 'proc:me');
    expect(written).toMatch(/^5 \d+ =other\.1 10000 \d+ 1$/);
  });

  it('a leaving waiter hands on the keys granted to it, but for the one it keeps', async () => {
    const [client] = await connectMasters([fleet.urls()[0]!]);
    opened.push(client!);
    const now = await nowOn(client!);
    for (const key of ['h3', 'h4']) {
      await client!.set(key, 'mine.4', 'PX', 60_000);
      await client!.hset(`${key}:q`, 'proc:next', `9 ${now + 60_000}`);
    }
    await client!.eval(LEAVE_SCRIPT.source, 3, 'h3', 'h3:q', 'h3:h', QUEUE_ENTRY_STAY_MS, 'proc:me', 'mine.', '');
    expect(await client!.get('h3')).toBe('~proc:next');
    await client!.eval(LEAVE_SCRIPT.source, 3, 'h4', 'h4:q', 'h4:h', QUEUE_ENTRY_STAY_MS, 'proc:me', 'mine.', 'mine.4');
    expect(await client!.get('h4')).toBe('mine.4');
  });
});

describe.each(CLIENT_LIBRARIES)('on %s', (library: ClientLibrary) => {
  describe('a release hands the lock to the head of the queue', () => {
    it.each([
      ['on', true, 1],
      ['off (the control)', false, 2],
    ])('hand-off %s: the waiter sends %#: one round that queued it, and no other', async (_name, handOff, rounds) => {
      const resource = `granted-${handOff}`;
      const a = await separateEngineOn(library, fleet.urls(), opened, PATIENT);
      const b = await separateEngineOn(library, fleet.urls(), opened, { ...PATIENT, handOff });
      await warmUp(a.redlock, b.redlock, a.clients, `${resource}-warm-up`);
      const held = await a.redlock.acquire(resource, 10_000);
      await heldEverywhere(a.clients, `redlock:${resource}`);
      const acquires = countAcquires(b.lockClients);
      const waiting = b.redlock.acquire(resource, 10_000, { waitTimeoutMs: 20_000 });
      await enlisted(a.clients, resource);
      await held.release();
      const lock = await waiting;
      // Off, the release only reserves the key: the waiter needs a second round to take it.
      expect(acquires).toEqual(b.clients.map(() => rounds));
      // Granted with the token its request left in its entry, on every master.
      expect(await Promise.all(b.clients.map((client) => client.get(`redlock:${resource}`)))).toEqual(b.clients.map(() => lock.token));
      expect(lock.remainingMs()).toBeGreaterThan(0);
      expect(lock.remainingMs()).toBeLessThanOrEqual(10_000);
      // A lock like any other: it extends, and its release frees the key everywhere.
      await lock.extend(10_000);
      expect((await lock.release()).heldUntilRelease).toBe(true);
      await expect.poll(() => Promise.all(b.clients.map((client) => client.exists(`redlock:${resource}`)))).toEqual([0, 0, 0]);
    });

    it('never to a second caller: the releaser asking again waits behind the granted head', async () => {
      const a = await separateEngineOn(library, fleet.urls(), opened, PATIENT);
      const b = await separateEngineOn(library, fleet.urls(), opened, PATIENT);
      const held = await a.redlock.acquire('no-barging', 10_000);
      await heldEverywhere(a.clients, 'redlock:no-barging');
      const waiting = b.redlock.acquire('no-barging', 10_000, { waitTimeoutMs: 20_000 });
      await enlisted(a.clients, 'no-barging');
      await held.release();
      expect(await a.redlock.tryAcquire('no-barging', 10_000)).toBeNull();
      const lock = await waiting;
      await lock.release();
    });
  });

  describe('shutting down an engine with a waiter in the masters\' queue', () => {
    it('makes the waiter give up and leave, so the next release grants it nothing', async () => {
      const a = await separateEngineOn(library, fleet.urls(), opened, PATIENT);
      const b = await separateEngineOn(library, fleet.urls(), opened, PATIENT);
      const held = await a.redlock.acquire('shutdown', 10_000);
      await heldEverywhere(a.clients, 'redlock:shutdown');
      const waiting = b.redlock.acquire('shutdown', 10_000, { waitTimeoutMs: 20_000 });
      const outcome = waiting.then(
        () => 'acquired',
        (error: unknown) => (error as { code?: string }).code,
      );
      await enlisted(a.clients, 'shutdown');
      await b.redlock.releaseAll('test shutdown');
      expect(await outcome).toBe('ACQUIRE_ABORTED');
      // Its entries are gone: the release frees the key instead of granting it to a waiter that
      // will never use it (which would block the lock for that waiter's ttl).
      expect(await Promise.all(a.clients.map((client) => client.hlen('redlock-queue:shutdown')))).toEqual([0, 0, 0]);
      await held.release();
      await expect.poll(() => Promise.all(a.clients.map((client) => client.exists('redlock:shutdown')))).toEqual([0, 0, 0]);
      expect(await a.redlock.tryAcquire('shutdown', 10_000)).not.toBeNull();
    });
  });

  describe('the grants a waiter counts', () => {
    const TTL = 10_000;
    const DRIFT = 0.01;
    const KEY = 'redlock:counted';
    /** The engine's clients of the library under test, and the test's probes of the same masters. */
    const connect = async (urls: readonly string[]) => {
      const lock = await connectLockClients(library, urls);
      const clients = await connectMasters(urls);
      opened.push(...lock, ...clients);
      return { lock, clients };
    };
    const identified = async (clients: readonly RedlockClient[]): Promise<RedisNode[]> => {
      const nodes = clients.map((client) => new RedisNode(masterClientOf(client)));
      await Promise.all(nodes.map((node) => node.identify(() => {})));
      return nodes;
    };
    const round = (statuses: readonly ('refused' | 'granted' | 'timeout')[]): RoundResult => ({
      outcomes: statuses.map((status, index) => ({ node: `m${index}`, status })),
      granted: statuses.filter((s) => s === 'granted').length,
      refused: statuses.filter((s) => s === 'refused').length,
      requests: statuses.map(() => Promise.resolve()),
    });
    /** Grants for KEY, with every master's confirmation verdict recorded as it comes. */
    const counting = (nodes: readonly RedisNode[]) => {
      const grants = new HandOffGrants(nodes, 2, KEY, DRIFT);
      const verdicts: [Confirmation, number][] = [];
      grants.whenConfirmed((held, master) => verdicts.push([held, master]));
      /** What the waiter makes of master `master`'s message for request `anchor`, once that master was asked. */
      const told = async (master: number, anchor: number): Promise<Confirmation | 'no'> => {
        const before = verdicts.length;
        const verdict = grants.granted(master, anchor);
        if (verdict !== 'later') return verdict;
        await expect.poll(() => verdicts.length).toBeGreaterThan(before);
        return verdicts[before]![0];
      };
      return { grants, verdicts, told };
    };
    /** What a release's hand-off leaves on a master: KEY holding the waiter's token of request `anchor`. */
    const handedOff = (clients: readonly Redis[], grants: HandOffGrants, anchor: number) =>
      Promise.all(clients.map((client) => client.set(KEY, grants.tokenFor(anchor), 'PX', TTL)));
    /**
     * Grants counted for request 1, which every master granted by hand-off (KEY holds its token
     * everywhere) after a round that failed with these outcomes.
     */
    const grantedAfter = async (clients: readonly Redis[], nodes: readonly RedisNode[], statuses: Parameters<typeof round>[0]) => {
      const counted = counting(nodes);
      counted.grants.sending(1);
      await handedOff(clients, counted.grants, 1);
      counted.grants.failed(round(statuses));
      return counted;
    };

    it("validity comes from the waiter's own clock and the master's PTTL; the message only names the request", async () => {
      const { lock, clients } = await connect(fleet.urls());
      const nodes = await identified(lock);
      const { grants, verdicts, told } = counting(nodes);
      const clock = vi.spyOn(performance, 'now').mockReturnValue(1_000);
      try {
        grants.sending(3);
        await handedOff(clients, grants, 3);
        // Early: before its round was decided; asked once it is, as master 0 refused.
        expect(grants.granted(0, 3)).toBe('later');
        clock.mockReturnValue(2_000);
        grants.failed(round(['refused', 'refused', 'refused']));
        await expect.poll(() => verdicts).toEqual([['counted', 0]]);
        // Another request's grant never counts, and is not even asked about.
        expect(await told(1, 2)).toBe('no');
        expect(await told(1, 3)).toBe('held');
        // Both confirmations left at 2 000 and found at most TTL left: neither can claim more.
        expect(grants.lock!.deadline).toBeLessThanOrEqual(2_000 + validityMs(TTL, 0, DRIFT));
        expect(grants.lock!.deadline).toBeGreaterThan(2_000);
        expect(grants.lock!.token).toBe(`${grants.prefix}3`);
        expect([...grants.lock!.masters].sort()).toEqual([0, 1]);
      } finally {
        clock.mockRestore();
      }
    });

    it('a message for a key the master did not set to our token counts for nothing (a forged wake-up)', async () => {
      const { lock, clients } = await connect(fleet.urls());
      const nodes = await identified(lock);
      const { grants, verdicts, told } = counting(nodes);
      grants.sending(1);
      grants.failed(round(['refused', 'refused', 'refused']));
      // Another holder's token on every master: every message is a lie.
      await Promise.all(clients.map((client) => client.set(KEY, 'the-holder', 'PX', TTL)));
      for (const master of [0, 1, 2]) expect(await told(master, 1)).toBe('refuted');
      // Asked again on a later message (the release may have come since), one question at a time.
      expect(grants.granted(0, 1)).toBe('later');
      expect(grants.granted(0, 1)).toBe('later');
      await expect.poll(() => verdicts.length).toBe(4);
      expect(verdicts.at(-1)).toEqual(['refuted', 0]);
      expect(grants.lock).toBeUndefined();
    });

    it('once per server, as the connection identified it', async () => {
      // Two names for master 0's server (as a proxy would give), and master 1.
      const { lock, clients } = await connect([fleet.urls()[0]!, fleet.urls()[0]!, fleet.urls()[1]!]);
      const nodes = await identified(lock);
      expect(nodes[1]!.runId).toBe(nodes[0]!.runId);
      const { told } = await grantedAfter(clients, nodes, ['refused', 'refused', 'refused']);
      expect(await told(0, 1)).toBe('counted');
      // The same release, heard by the second name's subscriber.
      expect(await told(1, 1)).toBe('not counted');
      expect(await told(2, 1)).toBe('held');

      // The second name failed instead of refusing: the round's cleanup goes there, to the same
      // server, and could delete the grant. That server's grant does not count.
      const cleaned = await grantedAfter(clients, nodes, ['refused', 'timeout', 'refused']);
      expect(await cleaned.told(0, 1)).toBe('not counted');
      expect(await cleaned.told(2, 1)).toBe('counted');
      expect(cleaned.grants.lock).toBeUndefined();
    });

    it('only from masters that refused that request, over the connection that carried the refusal', async () => {
      const { lock, clients } = await connect(fleet.urls());
      const nodes = await identified(lock);
      // The control first, on connections that have not moved: masters 0 and 2 refused, and their grants make a lock.
      const control = await grantedAfter(clients, nodes, ['refused', 'timeout', 'refused']);
      expect(await control.told(0, 1)).toBe('counted');
      expect(await control.told(2, 1)).toBe('held');

      const { grants, told } = await grantedAfter(clients, nodes, ['refused', 'timeout', 'refused']);
      // Master 1 did not refuse: a cleanup may still delete what it granted.
      expect(await told(1, 1)).toBe('no');
      // Master 2's connection closes and comes back: whoever answers there now may be another server.
      const before = nodes[2]!.connection;
      await dropConnection(lock[2]!);
      await expect.poll(() => nodes[2]!.connection).not.toBe(before);
      await untilLockClientReady(lock[2]!);
      expect(await told(2, 1)).toBe('no');
      expect(await told(0, 1)).toBe('counted');
      expect(grants.lock).toBeUndefined();
    });

    it("from a master whose answer is still on its way, once that answer is a refusal (a straggler's cleanup is not sent then)", async () => {
      const { lock, clients } = await connect(fleet.urls());
      const nodes = await identified(lock);
      for (const [late, verdict] of [['refused', 'held'], ['granted', 'not counted']] as const) {
        const { grants, verdicts, told } = counting(nodes);
        grants.sending(1);
        await handedOff(clients, grants, 1);
        let answer!: () => void;
        const decided = round(['refused', 'refused', 'refused']);
        decided.outcomes[2]!.status = 'pending';
        (decided.requests as Promise<unknown>[])[2] = new Promise<void>((resolve) => (answer = resolve));
        grants.failed(decided);
        expect(grants.granted(2, 1)).toBe('later');
        expect(await told(1, 1)).toBe('counted');
        decided.outcomes[2]!.status = late;
        answer();
        await expect.poll(() => verdicts.length).toBe(2);
        expect(verdicts[1]).toEqual([verdict, 2]);
        expect(grants.lock !== undefined).toBe(verdict === 'held');
      }
    });
  });
});
