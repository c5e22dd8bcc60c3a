import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockHeldError, Redlock } from '../../lib/index.js';
import { ACQUIRE_SCRIPT } from '../../lib/core/kinds/exclusive/exclusive-scripts.js';
import { connectMasters, disconnectAll, FRESH_FLEET, keysOn } from '../support/masters.js';
import { EVERY_CLIENT_VERSION, connectLockClients, type ClientLibrary } from '../support/lock-clients.js';
import type { RedlockClient } from '../../lib/core/voters/clients/clients.js';
import { RedisFleet } from '../support/redis-fleet.js';

let fleet: RedisFleet;
/** The engines' clients, of the library under test. */
const lockClients: RedlockClient[] = [];
/** The test's own view of each master (ioredis: the harness, not the client under test). */
let probes: Redis[];
const opened: Redis[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(5);
  probes = await connectMasters(fleet.urls());
  opened.push(...probes);
});

afterAll(async () => {
  disconnectAll(lockClients);
  disconnectAll(opened);
  await fleet?.stopAll();
});

describe.each(EVERY_CLIENT_VERSION)('on %s', (library: ClientLibrary) => {
  beforeAll(async () => {
    await Promise.all(probes.map((probe) => probe.flushall()));
  });

  /** One engine with connections of its own, as a separate replica of an app would have. */
  async function engine(masters: number): Promise<Redlock> {
    const clients = await connectLockClients(library, fleet.urls().slice(0, masters));
    lockClients.push(...clients);
    const redlock = new Redlock(clients, { ...FRESH_FLEET, logger: { warn: () => {} } });
    // Identified before its first round, so its takes all go out at once, as a long-lived engine's do.
    await redlock.verifyMasters();
    return redlock;
  }

  /**
   * Every request sent on `clients` so far has been answered, and so has what those answers made
   * the engines send next (a straggler's reply sends its master a leave, on a later turn).
   */
  async function answered(clients: readonly RedlockClient[]): Promise<void> {
    for (let pass = 0; pass < 2; pass++) {
      await Promise.all(clients.map((client) => (client as unknown as { ping(): Promise<unknown> }).ping()));
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  describe.each([1, 3, 5])('%i master(s)', (masters) => {
    it('never lets two of many concurrent clients inside the same lock', async () => {
      const engines = await Promise.all(Array.from({ length: 6 }, () => engine(masters)));
      const resource = `hot-${masters}`;
      let inside = 0;
      let mostInside = 0;
      let cycles = 0;
      await Promise.all(
        engines.flatMap((redlock) =>
          Array.from({ length: 3 }, async () => {
            for (let i = 0; i < 8; i++) {
              await redlock.using(
                resource,
                2_000,
                async () => {
                  inside++;
                  mostInside = Math.max(mostInside, inside);
                  await sleep(1); // the critical section's work: lets the others try to get in
                  inside--;
                  cycles++;
                },
                { waitTimeoutMs: 60_000 },
              );
            }
          }),
        ),
      );
      expect(mostInside).toBe(1);
      expect(cycles).toBe(6 * 3 * 8);
      const clients = probes.slice(0, masters);
      // A release settles at a quorum and queue entries leave without waiting for the reply: a
      // loaded machine answers their stragglers late (over a second beside a second copy of the
      // suite). Once every engine connection has answered what it was sent, and what those
      // answers made it send, whatever is left is what the engines left, to live its ttl (2 s) or
      // an entry's stay. Each leftover says what it holds and for how long more.
      await answered(lockClients);
      const left = async () => {
        const found: string[] = [];
        for (const [index, client] of clients.entries()) {
          for (const key of await client.keys(`*${resource}`)) {
            const value = (await client.type(key)) === 'string' ? ` = ${await client.get(key)}` : '';
            found.push(`master ${index} ${key}${value} (pttl ${await client.pttl(key)})`);
          }
        }
        return found;
      };
      await expect.poll(left, { timeout: 1_000, interval: 20 }).toEqual([]);
    });

    it('takes a multi-resource lock all or nothing', async () => {
      const [holder, contender] = [await engine(masters), await engine(masters)];
      // Released by hand below: a long ttl, so a loaded machine's slow poll never sees it expire first.
      const middle = await holder.acquire(`mr-${masters}-b`, 30_000);

      const names = ['a', 'b', 'c'].map((n) => `mr-${masters}-${n}`);
      await expect(contender.acquire(names, 5_000, { retryCount: 0 })).rejects.toBeInstanceOf(LockHeldError);
      const clients = probes.slice(0, masters);
      // The failed attempt's cleanup settles at a quorum: a lagging master may still hold a or c a
      // moment. The holder's own grant settled at a quorum too: where its take was late (waiting
      // for its master to be identified, on a loaded machine) the contender's got there first, and
      // that master holds no b once the contender's cleanup lands.
      const heldThere = async () => (await keysOn(clients, `redlock:mr-${masters}-*`)).map((keys) => [...keys].sort().join(' '));
      await expect.poll(async () => (await heldThere()).filter((keys) => keys !== '' && keys !== `redlock:mr-${masters}-b`), { timeout: 5_000 }).toEqual([]);
      expect((await heldThere()).filter((keys) => keys !== '').length).toBeGreaterThanOrEqual(Math.floor(masters / 2) + 1);

      await middle.release();
      const all = await contender.acquire(names, 5_000, { retryCount: 0 });
      try {
        // The release settled at a quorum: a master it had not reached yet may have refused the
        // contender, and holds none of its keys. No master holds some of them without the rest.
        const perMaster = await Promise.all(clients.map((c) => c.mget(...names.map((n) => `redlock:${n}`))));
        const ours = perMaster.map((values) => values.filter((value) => value === all.token).length);
        expect(ours.every((count) => count === 0 || count === names.length)).toBe(true);
        expect(ours.filter((count) => count === names.length).length).toBeGreaterThanOrEqual(Math.floor(masters / 2) + 1);
      } finally {
        await all.release();
      }
    });
  });

  describe('per-node all or nothing', () => {
    it('a master where one of the resources is taken sets none of them, and the quorum still decides', async () => {
      const redlock = await engine(3);
      const clients = probes.slice(0, 3);
      await clients[0]!.set('redlock:pn-b', 'someone-else', 'PX', 10_000);

      const lock = await redlock.acquire(['pn-a', 'pn-b'], 5_000, { retryCount: 0 });
      expect(await clients[0]!.exists('redlock:pn-a')).toBe(0);
      expect(await clients[0]!.get('redlock:pn-b')).toBe('someone-else');
      for (const client of clients.slice(1)) {
        expect(await client.mget('redlock:pn-a', 'redlock:pn-b')).toEqual([lock.token, lock.token]);
      }
      await lock.release();
      expect(await clients[0]!.get('redlock:pn-b')).toBe('someone-else');
    });

    it('refused by a majority: fails, says who refused, and leaves none of its own keys', async () => {
      const redlock = await engine(5);
      const clients = probes.slice(0, 5);
      for (const client of clients.slice(0, 3)) await client.set('redlock:maj', 'other-owner', 'PX', 10_000);

      // Three rounds: the first, one right after subscribing to wake-ups, one when the budget ends.
      const error = await redlock.acquire('maj', 5_000, { retryCount: 2, waitTimeoutMs: 200 }).catch((e) => e);
      expect(error).toBeInstanceOf(LockHeldError);
      expect(error.code).toBe('LOCK_HELD');
      expect(error.attempts).toBe(3);
      expect(error.refusedBy).toEqual(fleet.nodes.slice(0, 3).map((n) => `127.0.0.1:${n.port}`));
      expect(error.retryAfterMs).toBeGreaterThan(0);
      expect(error.message).not.toContain('other-owner');
      const values = () => Promise.all(clients.map((c) => c.get('redlock:maj')));
      await expect.poll(values).toEqual(['other-owner', 'other-owner', 'other-owner', null, null]);
    });

    it('uses a fresh token for every round, so its own leftovers never vote against it', async () => {
      const redlock = await engine(3);
      const clients = probes.slice(0, 3);
      const seen = new Set<string>();
      // Observe the token each round writes by holding the key elsewhere on two masters.
      for (const client of clients.slice(0, 2)) await client.set('redlock:fresh', 'other', 'PX', 10_000);
      const spare = clients[2]!.duplicate();
      const monitor = await spare.monitor();
      opened.push(spare, monitor as unknown as Redis);
      let markerSeen!: () => void;
      const marker = new Promise<void>((resolve) => (markerSeen = resolve));
      monitor.on('monitor', (_time: string, args: string[]) => {
        // Each round's take: a plain SET key token, or the acquire script, whose first argument
        // after the keys is the token.
        const command = args[0]?.toLowerCase();
        if (command === 'set' && args[1] === 'redlock:fresh') seen.add(args[2]!);
        const acquireScript = (command === 'evalsha' && args[1] === ACQUIRE_SCRIPT.sha) || (command === 'eval' && args[1] === ACQUIRE_SCRIPT.source);
        if (acquireScript && args.includes('redlock:fresh')) seen.add(args[3 + Number(args[2])]!);
        if (args[0]?.toLowerCase() === 'echo' && args[1] === 'fresh-done') markerSeen();
      });
      const error = await redlock.acquire('fresh', 5_000, { retryCount: 3, waitTimeoutMs: 300 }).catch((e) => e);
      expect(error).toBeInstanceOf(LockHeldError);
      // MONITOR reports commands in the order the server ran them: once it shows this marker,
      // it has shown every round's acquire and release before it.
      await clients[2]!.echo('fresh-done');
      await marker;
      expect(error.attempts).toBeGreaterThanOrEqual(3);
      expect(seen.size).toBe(error.attempts);
    });
  });
});
