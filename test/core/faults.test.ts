import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LockHeldError, QuorumUnreachableError, Redlock, type ReleaseResult } from '../../lib/index.js';
import { ACQUIRE_SCRIPT, RELEASE_ONE_SCRIPT, RELEASE_SCRIPT } from '../../lib/core/kinds/exclusive/exclusive-scripts.js';
import { connectMasters, disconnectAll, FRESH_FLEET, keysOn, untilReady, watchCalls } from '../support/masters.js';
import { EVERY_CLIENT_VERSION, connectLockClients, untilLockClientReady, type ClientLibrary } from '../support/lock-clients.js';
import type { RedlockClient } from '../../lib/core/voters/clients/clients.js';
import { RedisFleet } from '../support/redis-fleet.js';

let fleet: RedisFleet;
/** The test's own view of each master (ioredis: the harness, not the client under test). */
let clients: Redis[];
/** The engine's clients, of the library under test. */
let lockClients: RedlockClient[];
let redlock: Redlock;

beforeAll(async () => {
  fleet = await RedisFleet.start(5);
});

afterAll(async () => {
  await fleet?.stopAll();
});

const nameOf = (index: number) => `127.0.0.1:${fleet.nodes[index]!.port}`;

/**
 * Counts the lock requests a client sends from now on: acquires (a plain SET or the acquire
 * script) and releases (keys in release script calls), not counting the EVAL that repeats a
 * request after NOSCRIPT.
 */
function countLockRequests(client: RedlockClient): { acquires: number; releases: number } {
  const count = { acquires: 0, releases: 0 };
  watchCalls(client, 'set', () => count.acquires++);
  watchCalls(client, 'evalsha', ([sha, numberOfKeys]) => {
    if (sha === ACQUIRE_SCRIPT.sha) count.acquires++;
    // One call may carry the releases of several locks (lock keys, then as many queue keys).
    if (sha === RELEASE_SCRIPT.sha) count.releases += Number(numberOfKeys) / 2;
    if (sha === RELEASE_ONE_SCRIPT.sha) count.releases++;
  });
  return count;
}

describe.each(EVERY_CLIENT_VERSION)('on %s', (library: ClientLibrary) => {
  beforeEach(async () => {
    clients = await connectMasters(fleet.urls());
    lockClients = await connectLockClients(library, fleet.urls());
    redlock = new Redlock(lockClients, FRESH_FLEET);
  });

  afterEach(async () => {
    redlock.close();
    disconnectAll(lockClients);
    disconnectAll(clients);
    // Every test leaves all five masters up, empty and answering for the next one.
    for (const node of fleet.nodes) {
      if (node.paused) fleet.resume(node.index);
      if (!node.running) await fleet.start(node.index);
    }
    // Commands a paused master had queued ran on resume; their keys would expire, but not in time.
    const cleaners = await connectMasters(fleet.urls());
    await Promise.all(cleaners.map((c) => c.flushall()));
    disconnectAll(cleaners);
  });

  describe('a minority of masters down', () => {
    it('acquires, extends and releases with 2 of 5 masters killed', async () => {
      await fleet.kill(0);
      await fleet.kill(3);
      const lock = await redlock.acquire('minority', 2_000);
      expect(lock.remainingMs()).toBeGreaterThan(0);
      await lock.extend(4_000);
      expect(lock.remainingMs()).toBeGreaterThan(2_000);
      const result = await lock.release();
      expect(result.heldUntilRelease).toBe(true);
      expect(result.releasedOn).toBe(3);
      // Decided at the quorum; the dead masters' failures land in `nodes` as they come.
      await expect.poll(() => result.nodes.filter((n) => n.status === 'error').map((n) => n.node)).toEqual([nameOf(0), nameOf(3)]);
      await expect.poll(async () => (await keysOn([clients[1]!, clients[2]!, clients[4]!])).flat()).toEqual([]);
    });
  });

  describe('a majority of masters down', () => {
    it('fails at once with the quorum error naming the dead masters, and leaves no key', async () => {
      await Promise.all([fleet.kill(1), fleet.kill(2), fleet.kill(4)]);
      // A long wait budget: the failure must come from the first round, not from waiting it out.
      const error = await redlock.acquire('majority', 2_000, { waitTimeoutMs: 600_000 }).catch((e) => e);
      expect(error).toBeInstanceOf(QuorumUnreachableError);
      expect(error.code).toBe('QUORUM_UNREACHABLE');
      expect(error.failedNodes.sort()).toEqual([nameOf(1), nameOf(2), nameOf(4)].sort());
      for (const index of [1, 2, 4]) expect(error.message).toContain(nameOf(index));
      await expect.poll(async () => (await keysOn([clients[0]!, clients[3]!])).flat()).toEqual([]);
      await expect(redlock.tryAcquire('majority', 2_000)).rejects.toBeInstanceOf(QuorumUnreachableError);
    });

    it('tells a line of local waiters about the outage in one round each', async () => {
      await Promise.all([fleet.kill(0), fleet.kill(1), fleet.kill(2)]);
      const alive = [clients[3]!, clients[4]!];
      const sent = [lockClients[3]!, lockClients[4]!].map(countLockRequests);
      const waiters = Array.from({ length: 20 }, () => redlock.acquire('outage', 2_000, { waitTimeoutMs: 600_000 }).catch((e) => e));
      const errors = await Promise.all(waiters);
      expect(errors.every((e) => e instanceof QuorumUnreachableError)).toBe(true);
      // The head of the line tries three rounds (a blip is worth two retries), each waiter behind it
      // one. A round's cleanup goes only where it may have been granted (not where it was refused,
      // for example by the key of a round before it whose cleanup had not landed yet), and in the
      // end no key is left.
      await expect.poll(() => sent.map((count) => count.acquires)).toEqual([3 + 19, 3 + 19]);
      await expect.poll(async () => (await keysOn(alive)).flat().filter((key) => key.startsWith('redlock:'))).toEqual([]);
      // The first round was granted by both live masters; the others, maybe not.
      for (const count of sent) expect(count.releases).toBeGreaterThanOrEqual(1);
      for (const count of sent) expect(count.releases).toBeLessThanOrEqual(3 + 19);
    });

    it('is live again once the masters come back', async () => {
      await Promise.all([fleet.kill(0), fleet.kill(1), fleet.kill(2)]);
      await expect(redlock.acquire('comeback', 2_000)).rejects.toBeInstanceOf(QuorumUnreachableError);
      await Promise.all([fleet.start(0), fleet.start(1), fleet.start(2)]);
      await Promise.all([...clients.map(untilReady), ...lockClients.map(untilLockClientReady)]);
      const lock = await redlock.acquire('comeback', 2_000);
      const result = await lock.release();
      await expect.poll(() => result.nodes.filter((n) => n.status === 'granted').length).toBe(5);
    });
  });

  describe('a paused master', () => {
    it('does not stall acquire beyond the node timeout', async () => {
      const patient = new Redlock(lockClients, { ...FRESH_FLEET, nodeTimeoutMs: 300 });
      fleet.pause(2);
      const lock = await patient.acquire('paused-one', 5_000); // four others answer: no wait at all
      await lock.release();

      fleet.pause(3);
      fleet.pause(4);
      const started = performance.now();
      const error = await patient.acquire('paused-three', 5_000, { waitTimeoutMs: 600_000 }).catch((e) => e);
      const took = performance.now() - started;
      expect(error).toBeInstanceOf(QuorumUnreachableError);
      expect(error.nodes.filter((n: { status: string }) => n.status === 'timeout').map((n: { node: string }) => n.node))
        .toEqual([nameOf(2), nameOf(3), nameOf(4)]);
      // Without the round deadline this would hang for as long as the masters stay paused. The
      // bound is loose on purpose: it separates "bounded by the timeout" from "hangs", not speeds.
      expect(took).toBeLessThan(300 * 10);
    });
  });

  describe('a master slow to say who it is', () => {
    it('gets every request in the order it was made once it answers, and keeps no released key', async () => {
      // A fresh engine asks each master who it is before its first vote; a master that does not
      // answer yet holds back every request for it, here 20 takes and 20 releases, while the
      // others make the quorums. Once it answers they all go out in one tick: takes and frees
      // batched by kind would put the frees first, and the late takes would keep a key (lock #1's)
      // for its 30 s.
      fleet.pause(4);
      const taken: string[] = [];
      let last: ReleaseResult | undefined;
      for (let i = 0; i < 20; i++) {
        const lock = await redlock.acquire('caught-up', 30_000);
        taken.push(lock.token);
        last = await lock.release();
      }
      fleet.resume(4);
      // Once the last release has landed there, everything before it was sent: a read over the
      // engine's own connection queues behind all of it.
      await expect.poll(() => last!.nodes[4]!.status, { timeout: 10_000 }).not.toBe('pending');
      const owner = await (lockClients[4] as unknown as { get(key: string): Promise<string | null> }).get('redlock:caught-up');
      expect(owner === null ? 'none' : `lock #${taken.indexOf(owner)}`).toBe('none');
      await expect.poll(async () => (await keysOn(clients)).flat()).toEqual([]);
    });
  });

  describe('script cache loss', () => {
    it('survives SCRIPT FLUSH mid-run', async () => {
      const taken: string[] = [];
      for (let i = 0; i < 20; i++) {
        if (i === 10) await Promise.all(clients.map((c) => c.script('FLUSH')));
        const lock = await redlock.acquire('flushed', 30_000);
        taken.push(lock.token);
        await lock.release();
      }
      // A release settles at a quorum: a loaded straggler gets seconds, far less than the 30 s a key
      // left behind would live (double-load copies took over a second, and once over 5 s on a
      // machine half as fast): 15 s still tells the two apart. What is left, if anything, is
      // described by whose token it holds and for how long more, for a failure to explain itself.
      const leftBehind = async () => {
        const left: string[] = [];
        for (const [index, client] of clients.entries()) {
          for (const key of await client.keys('*')) {
            const owner = key === 'redlock:flushed' ? await client.get(key) : null;
            const whose = owner === null ? '' : taken.indexOf(owner) >= 0 ? ` = lock #${taken.indexOf(owner)}` : ` = ${owner}`;
            left.push(`${nameOf(index)} ${key}${whose} (pttl ${await client.pttl(key)})`);
          }
        }
        return left;
      };
      await expect.poll(leftBehind, { timeout: 15_000 }).toEqual([]);
    });

    it('never lets a release overtake an acquire re-sent after NOSCRIPT', async () => {
      // Three masters refuse at once while two are still re-sending the acquire as EVAL: the
      // cleanup release that follows must not land before it, or it would leave a stray key.
      // Fenced, so that the acquire is a script (a plain SET NX cannot meet NOSCRIPT).
      for (const client of clients.slice(0, 3)) await client.set('redlock:overtake', 'other', 'PX', 60_000);
      for (let i = 0; i < 20; i++) {
        await Promise.all(clients.map((c) => c.script('FLUSH')));
        expect(await redlock.tryAcquire('overtake', 30_000, { fencing: true })).toBeNull();
      }
      const values = () => Promise.all(clients.map((c) => c.get('redlock:overtake')));
      await expect.poll(values).toEqual(['other', 'other', 'other', null, null]);
    });

    it('never leaves a key behind a tick of batched takes, which a release follows at once', async () => {
      // Refused by three masters, each tryAcquire cleans up on the other two without waiting for
      // their takes: safe only because a take is never answered NOSCRIPT and re-sent after it.
      const resources = Array.from({ length: 10 }, (_, i) => `batched:${i}`);
      for (const client of clients.slice(0, 3)) {
        for (const resource of resources) await client.set(`redlock:${resource}`, 'other', 'PX', 60_000);
      }
      for (let i = 0; i < 20; i++) {
        await Promise.all(clients.map((c) => c.script('FLUSH')));
        const locks = await Promise.all(resources.map((resource) => redlock.tryAcquire(resource, 30_000)));
        expect(locks).toEqual(resources.map(() => null));
      }
      const values = () => Promise.all(clients.slice(3).map((c) => c.mget(...resources.map((r) => `redlock:${r}`))));
      await expect.poll(values).toEqual([resources.map(() => null), resources.map(() => null)]);
    });
  });

  describe('contention with a crashed holder', () => {
    it('reports how long the blocking key still lives', async () => {
      const holder = await redlock.acquire('crashed', 3_000);
      const error = await redlock.acquire('crashed', 3_000, { retryCount: 0 }).catch((e) => e);
      expect(error).toBeInstanceOf(LockHeldError);
      expect(error.retryAfterMs).toBeGreaterThan(0);
      expect(error.retryAfterMs).toBeLessThanOrEqual(3_000);
      await holder.release();
    });
  });
});
