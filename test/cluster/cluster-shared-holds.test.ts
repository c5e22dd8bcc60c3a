import type { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { LockKindMismatchError, type Lock, type QuarantineNotice } from '../../lib/index.js';
import { ClusterVoter } from '../../lib/core/voters/cluster-voter.js';
import { keySlot } from '../../lib/core/base/key-slot.js';
import { ACQUIRE_SCRIPT } from '../../lib/core/kinds/exclusive/exclusive-scripts.js';
import { SHARED_ACQUIRE_SCRIPT, SHARED_RELEASE_SCRIPT } from '../../lib/core/kinds/shared/shared-scripts.js';
import { clusterVoterSuite } from './cluster-harness.js';

/**
 * Readers, writers and permits (`mode`, `limit`) with a whole Redis Cluster as one voter beside
 * two standalone masters: three voters, quorum two. The cluster has three shards with a replica
 * each. Each test uses resources of its own: nothing is flushed between them.
 */
const suite = clusterVoterSuite();
const { engine } = suite;

/** Resource names whose keys fall in different hash slots: `[a, b]`, and `c` in a's slot. */
function slots(prefix: string): { a: string; b: string; c: string } {
  const a = `${prefix}:a`;
  let b = '';
  for (let i = 1; !b; i++) if (keySlot(`{${prefix}:${i}}`) !== keySlot(`{${a}}`)) b = `${prefix}:${i}`;
  let c = '';
  for (let i = 1; !c; i++) if (keySlot(`{${prefix}:c${i}}`) === keySlot(`{${a}}`)) c = `${prefix}:c${i}`;
  return { a, b, c };
}

/** What the engine keeps for one resource, as a Cluster voter names it. */
const keysOf = (resource: string) => ({
  lock: `redlock:{${resource}}`,
  queue: `redlock-queue:{${resource}}`,
  holders: `redlock-holders:{${resource}}`,
  fence: `redlock-fence:{${resource}}`,
});

describe('a semaphore (limit 2) with a Redis Cluster voter', () => {
  it('keeps the holders, queue, fence and lock key of a resource in one hash slot, and extends and releases a permit', async () => {
    const { redlock, cluster: client } = await engine({ fencing: true, fenceTimeFloor: false });
    const names = keysOf('sem:one');
    expect(new Set(Object.values(names).map(keySlot)).size).toBe(1);
    const [p1, p2] = [await redlock.acquire('sem:one', 10_000, { limit: 2 }), await redlock.acquire('sem:one', 10_000, { limit: 2 })];
    expect(new Set([p1.slots![0], p2.slots![0]])).toEqual(new Set([0, 1]));
    // The round may be decided by the standalone masters before the cluster has answered.
    await expect.poll(() => client.hlen(names.holders)).toBe(2);
    await expect.poll(() => client.get(names.lock)).toBe('*s2');
    await expect.poll(() => client.get(names.fence)).toBe(String(p2.fence));
    await p1.extend(20_000);
    expect(p1.remainingMs()).toBeGreaterThan(10_000);
    await expect.poll(() => client.pttl(names.holders)).toBeGreaterThan(10_000);
    await Promise.all([p1.release(), p2.release()]);
    // Releases settle at a quorum: the cluster may free the keys a moment later.
    await expect.poll(() => client.exists(names.lock, names.holders)).toBe(0);
  });

  it('never has more than 2 permit holders at once among engines, and fencing tokens rise from holder to holder', async () => {
    const contenders = await Promise.all([1, 2, 3].map(() => engine({ fencing: true, fenceTimeFloor: false })));
    let inside = 0;
    let most = 0;
    let entries = 0;
    const handed: { asked: number; got: number; fence: number }[] = [];
    await Promise.all(
      contenders.flatMap(({ redlock }) =>
        Array.from({ length: 3 }, async () => {
          for (let i = 0; i < 4; i++) {
            const asked = performance.now();
            await redlock.using(
              'sem:hot',
              5_000,
              async (_signal, lock) => {
                handed.push({ asked, got: performance.now(), fence: lock.fence! });
                inside++;
                entries++;
                most = Math.max(most, inside);
                await new Promise((resolve) => setTimeout(resolve, 5));
                inside--;
              },
              { limit: 2, waitTimeoutMs: 40_000 },
            );
          }
        }),
      ),
    );
    expect(entries).toBe(36);
    expect(most).toBe(2);
    // A permit asked for after another was handed out has a larger token.
    for (const earlier of handed) {
      for (const later of handed) if (later.asked > earlier.got) expect(later.fence).toBeGreaterThan(earlier.fence);
    }
  }, 60_000);

  it('takes weighted permits over resources in several slots, all or none, with the same slots on the cluster voter', async () => {
    const { a, b } = slots('sem-weighted');
    const holder = await engine();
    const other = await engine();
    const three = await holder.redlock.acquire([a, b], 20_000, { limit: 4, permits: 3 });
    expect(three.slots).toEqual([0, 1, 2, 0, 1, 2]);
    // The cluster keeps one entry per resource, in each resource's own slot, with all three permits.
    await expect.poll(() => Promise.all([a, b].map((r) => holder.cluster.hget(keysOf(r).holders, three.token)))).toEqual([
      expect.stringMatching(/ 0,1,2$/),
      expect.stringMatching(/ 0,1,2$/),
    ]);
    expect(await other.redlock.tryAcquire([a, b], 20_000, { limit: 4, permits: 2 })).toBeNull();
    const one = await other.redlock.tryAcquire([b, a], 20_000, { limit: 4 });
    expect(one?.slots).toEqual([3, 3]);
    await Promise.all([three.release(), one!.release()]);
    await expect.poll(() => Promise.all([a, b].map((r) => holder.cluster.exists(keysOf(r).holders)))).toEqual([0, 0]);
  });

  it('is all or nothing over resources in several slots, on the cluster voter itself', async () => {
    const { a, b, c } = slots('sem-multi');
    const holder = await engine();
    const other = await engine();
    // b is full (slots 0 and 1); a has one permit (slot 0).
    const full = [await holder.redlock.acquire(b, 20_000, { limit: 2 }), await holder.redlock.acquire(b, 20_000, { limit: 2 })];
    const onA = await holder.redlock.acquire(a, 20_000, { limit: 2 });
    await expect.poll(() => holder.cluster.hlen(keysOf(b).holders)).toBe(2);
    await expect.poll(() => holder.cluster.hlen(keysOf(a).holders)).toBe(1);
    expect(await other.redlock.tryAcquire([a, b, c], 20_000, { limit: 2 })).toBeNull();

    // The voter: b's slot refuses, so it answers refused, having taken back what a's slot (a and c) granted.
    const voter = other.redlock.nodes[0] as ClusterVoter;
    const resources = [a, b, c];
    const keys = [...resources.map((r) => keysOf(r).lock), ...resources.map((r) => keysOf(r).queue), ...resources.map((r) => keysOf(r).holders)];
    const args = (token: string) => [token, 20_000, 3, '', 1, '*s2', 2, 1, '', '', ''];
    expect(await voter.run(SHARED_ACQUIRE_SCRIPT, keys, args('direct-refused'))).toEqual([0, expect.any(Number)]);
    for (const r of [a, c]) expect(await other.cluster.hexists(keysOf(r).holders, 'direct-refused')).toBe(0);
    expect(await other.cluster.exists(keysOf(c).lock)).toBe(0);

    // Once b has room, granted in every slot, the reply in the request's order: a and c from one
    // script, b from another (slot 1 free on a, slot 0 on b and c).
    const slotOf = full.find((p) => p.slots![0] === 0)!;
    await slotOf.release();
    await expect.poll(() => other.cluster.hlen(keysOf(b).holders)).toBe(1);
    expect(await voter.run(SHARED_ACQUIRE_SCRIPT, keys, args('direct-granted'))).toEqual([1, 0, '1', '0', '0', '1', '0', '0,1']);
    const release = await voter.run(SHARED_RELEASE_SCRIPT, keys, ['direct-granted', '', '*s2', 2, '1', '0', '0']);
    expect(release).toBe(3);
    await Promise.all([onA.release(), ...full.filter((p) => p !== slotOf).map((p) => p.release())]);
  });

  it('tells a lock over several slots which resource holds permits, by its index in the whole request', async () => {
    const { a, b, c } = slots('sem-kind');
    const { redlock, cluster: client } = await engine();
    const permit = await redlock.acquire(b, 20_000, { limit: 2 });
    await expect.poll(() => client.get(keysOf(b).lock)).toBe('*s2');
    const voter = redlock.nodes[0] as ClusterVoter;
    const resources = [a, b, c];
    const keys = [...resources.map((r) => keysOf(r).lock), ...resources.map((r) => keysOf(r).queue)];
    expect(await voter.run(ACQUIRE_SCRIPT, keys, ['direct-lock', 20_000, 3, '', 1, 1_000])).toEqual([2, 2, '*s2']);
    // a and c, in the other slot, were granted and taken back.
    expect(await existing(client, keysOf(a).lock, keysOf(c).lock)).toBe(0);
    const error = await redlock.acquire([a, b, c], 20_000, { waitTimeoutMs: 5_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockKindMismatchError);
    expect((error as LockKindMismatchError).resource).toBe(b);
    await permit.release();
  });
});

describe('a read-write lock with a Redis Cluster voter', () => {
  it('lets readers hold together and a writer exclude them, with rising fencing tokens', async () => {
    const [r1, r2, w] = await Promise.all([1, 2, 3].map(() => engine({ fencing: true, fenceTimeFloor: false })));
    const names = keysOf('rw:one');
    const readers = [await r1!.redlock.tryAcquire('rw:one', 20_000, { mode: 'read' }), await r2!.redlock.tryAcquire('rw:one', 20_000, { mode: 'read' })];
    expect(readers.every((reader) => reader !== null)).toBe(true);
    await expect.poll(() => r1!.cluster.get(names.lock)).toBe('*r');
    await expect.poll(() => r1!.cluster.hlen(names.holders)).toBe(2);
    expect(await w!.redlock.tryAcquire('rw:one', 20_000)).toBeNull();
    await readers[0]!.extend(20_000);
    await Promise.all(readers.map((reader) => reader!.release()));
    // Releases settle at a quorum: once the cluster has freed the key too, it grants the writer.
    await expect.poll(() => w!.cluster.exists(names.lock)).toBe(0);
    const writer = await w!.redlock.acquire('rw:one', 20_000, { waitTimeoutMs: 10_000 });
    expect(writer.fence).toBeGreaterThan(Math.max(...readers.map((reader) => reader!.fence!)));
    expect(await r1!.redlock.tryAcquire('rw:one', 20_000, { mode: 'read' })).toBeNull();
    await writer.release();
    const after = await r1!.redlock.acquire('rw:one', 20_000, { mode: 'read', waitTimeoutMs: 10_000 });
    expect(after.fence).toBeGreaterThan(writer.fence!);
    await after.release();
  });

  it('never lets a writer in beside readers or another writer, among engines', async () => {
    const contenders = await Promise.all([1, 2, 3].map(() => engine()));
    let readers = 0;
    let writers = 0;
    let mostReaders = 0;
    let overlap = false;
    await Promise.all(
      contenders.flatMap(({ redlock }, e) =>
        Array.from({ length: 3 }, async (_, w) => {
          for (let i = 0; i < 4; i++) {
            const write = (e + w + i) % 3 === 0;
            await redlock.using(
              'rw:hot',
              5_000,
              async () => {
                if (write) writers++;
                else readers++;
                mostReaders = Math.max(mostReaders, readers);
                if (writers > 1 || (writers > 0 && readers > 0)) overlap = true;
                await new Promise((resolve) => setTimeout(resolve, 5));
                if (write) writers--;
                else readers--;
              },
              { mode: write ? 'write' : 'read', waitTimeoutMs: 40_000 },
            );
          }
        }),
      ),
    );
    expect(overlap).toBe(false);
    expect(mostReaders).toBeGreaterThan(1);
  }, 60_000);

  it('takes a read lock over resources in several slots all or nothing', async () => {
    const { a, b } = slots('rw-multi');
    const holder = await engine();
    const other = await engine();
    const writer = await holder.redlock.acquire(b, 20_000);
    await expect.poll(() => holder.cluster.get(keysOf(b).lock)).toBe(writer.token);
    expect(await other.redlock.tryAcquire([a, b], 20_000, { mode: 'read' })).toBeNull();
    // Refused on every voter, cleaned everywhere (the cluster may be the straggler).
    await expect.poll(() => other.cluster.exists(keysOf(a).lock, keysOf(a).holders)).toBe(0);
    await writer.release();
    await expect.poll(() => other.cluster.exists(keysOf(b).lock)).toBe(0);
    const both = await other.redlock.acquire([a, b], 20_000, { mode: 'read', waitTimeoutMs: 10_000 });
    await expect.poll(() => Promise.all([a, b].map((r) => other.cluster.get(keysOf(r).lock)))).toEqual(['*r', '*r']);
    await both.release();
    await expect.poll(() => existing(other.cluster, keysOf(a).lock, keysOf(b).lock)).toBe(0);
  });
});

describe('a shard failover under held permits and a held writer', () => {
  it("keeps the taken-over slot's votes from counting for the window: no third permit, no reader beside the writer (and without it, both)", async () => {
    const windowMs = 1_500;
    // Two resources on one shard, held on it and standalone master 0; the shard's new master lacks them.
    const sem = 'fo:sem';
    const master = await suite.cluster().masterOf(`{${sem}}`);
    let rw = '';
    for (let i = 0; !rw; i++) if ((await suite.cluster().masterOf(`{fo:rw${i}}`)) === master) rw = `fo:rw${i}`;
    const { held, guarded, unguarded } = await suite.loseShard(
      `{${sem}}`,
      windowMs,
      async (holder) => ({
        permits: [await holder.redlock.acquire(sem, 30_000, { limit: 2 }), await holder.redlock.acquire(sem, 30_000, { limit: 2 })],
        writer: await holder.redlock.acquire(rw, 30_000),
      }),
      (client) => existing(client, keysOf(sem).holders, keysOf(rw).lock),
    );
    const { permits, writer } = held;

    // Guarded: master 0 refuses, master 1 grants, and the slot's new owner is quarantined.
    const notices: QuarantineNotice[] = [];
    guarded.redlock.on('quarantine', (notice: QuarantineNotice) => notices.push(notice));
    expect(await guarded.redlock.tryAcquire(sem, 30_000, { limit: 2 })).toBeNull();
    expect(await guarded.redlock.tryAcquire(rw, 30_000, { mode: 'read' })).toBeNull();
    // One notice for the takeover (a shard promoted by an earlier test may add its own, at first sight).
    const takeovers = notices.filter((notice) => notice.reason === 'run_id changed');
    expect(takeovers.map((notice) => notice.node)).toEqual([expect.stringMatching(/^cluster:127\.0\.0\.1:\d+ \(shard [0-9a-f]{12}\)$/)]);
    expect((await guarded.redlock.checkMasters()).masters[0]!.shardsQuarantinedForMs).toBeGreaterThan(0);

    // The control, counting the new owner at once: it and master 1 hand out a third permit, and a
    // reader beside the writer (once the guarded engine's attempts are cleaned off them).
    const granted: Lock[] = [];
    const grab = async (resource: string, options: { limit?: number; mode?: 'read' }) => {
      const lock = await unguarded.redlock.tryAcquire(resource, 30_000, options);
      if (lock) granted.push(lock);
      return lock !== null;
    };
    await expect.poll(() => grab(sem, { limit: 2 }), { timeout: 5_000 }).toBe(true);
    await expect.poll(() => grab(rw, { mode: 'read' }), { timeout: 5_000 }).toBe(true);
    for (const held of [...permits, writer]) expect(held.remainingMs()).toBeGreaterThan(0);
    await Promise.all([...granted, ...permits, writer].map((lock) => lock.release()));
  }, 90_000);
});

/** How many of `keys` exist, whatever their slots (one EXISTS per key: a Cluster refuses keys of several slots in one command). */
async function existing(client: Cluster, ...keys: string[]): Promise<number> {
  const each = await Promise.all(keys.map((key) => client.exists(key)));
  return each.reduce((sum, one) => sum + one, 0);
}
