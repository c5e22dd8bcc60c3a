import { describe, expect, it } from 'vitest';
import 'reflect-metadata';
import { Test } from '@nestjs/testing';
import { InvalidArgumentError, LockHeldError, RedlockModule, RedlockService, type DuplicateMaster, type Lock, type QuarantineNotice, type Redlock } from '../../lib/index.js';
import type { ClusterNode } from 'ioredis';
import { ClusterVoter } from '../../lib/core/voters/cluster-voter.js';
import { ACQUIRE_SCRIPT } from '../../lib/core/kinds/exclusive/exclusive-scripts.js';
import { keySlot } from '../../lib/core/base/key-slot.js';
import { ReleaseWakeups } from '../../lib/core/waiting/release-wakeups.js';
import { ConcurrencyProbe } from '../nest/nest-helpers.js';
import { clusterVoterSuite } from './cluster-harness.js';

/**
 * A whole Redis Cluster as one voter, beside two standalone masters: three voters, quorum two.
 * The cluster has three shards with a replica each, started by the test.
 */
const suite = clusterVoterSuite();
const { clusterClient, plainClients, voters, engine, ages } = suite;

/** Two resource names whose keys fall in different hash slots. */
function twoSlots(prefix: string): [string, string] {
  for (let i = 1; ; i++) {
    if (keySlot(`{${prefix}:a}`) !== keySlot(`{${prefix}:${i}}`)) return [`${prefix}:a`, `${prefix}:${i}`];
  }
}

describe('a Redis Cluster as one voter', () => {
  it('keeps each resource in one slot: lock, queue and fence keys share the resource as hash tag', async () => {
    const { redlock, cluster: client } = await engine({ fencing: true });
    const lock = await redlock.acquire('order:1', 5_000);
    // The round may be decided by the standalone masters before the cluster has answered.
    await expect.poll(() => client.get('redlock:{order:1}')).toBe(lock.token);
    await expect.poll(() => client.exists('redlock-fence:{order:1}')).toBe(1);
    await lock.release();
    expect(await client.exists('redlock:{order:1}')).toBe(0);
  });

  it('holds an election: the lease and the record of who leads share a slot, and every voter can say who leads', async () => {
    const { redlock, cluster: client } = await engine();
    const leadership = await redlock.election('shard-duty').campaign('pod-a');
    await expect.poll(() => client.get('redlock:{election:shard-duty}')).not.toBeNull();
    await expect.poll(() => client.get('redlock-leader:{election:shard-duty}')).toMatch(/\npod-a$/);
    const observer = await engine();
    expect(await observer.redlock.election('shard-duty').leader()).toMatchObject({ identity: 'pod-a', term: leadership.term });
    await leadership.resign();
    await expect.poll(() => observer.redlock.election('shard-duty').leader()).toBeNull();
  });

  it('hears releases through a subscriber of its own on one of the cluster\'s masters', async () => {
    const { redlock, cluster: client } = await engine();
    const wakeups = new ReleaseWakeups([redlock.nodes.find((node) => node instanceof ClusterVoter)!]);
    try {
      const heard: string[] = [];
      await wakeups.listen(['cluster-wake'], (next) => heard.push(next));
      await expect.poll(() => wakeups.namesReachUs).toBe(true);
      // A PUBLISH on any node of a cluster reaches the subscribers of every node.
      await client.publish('cluster-wake', 'someone');
      await expect.poll(() => heard).toEqual(['someone']);
    } finally {
      wakeups.close();
    }
  });

  it('is mutually exclusive across engines, for one resource and for resources in several slots', async () => {
    const [a, b] = twoSlots('pair');
    const contenders = await Promise.all([engine(), engine(), engine()]);
    const single = new ConcurrencyProbe();
    const pair = new ConcurrencyProbe();
    await Promise.all(
      contenders.flatMap(({ redlock }) =>
        Array.from({ length: 4 }, async () => {
          for (let i = 0; i < 5; i++) {
            await redlock.using('hot', 5_000, () => single.section(2), { waitTimeoutMs: 20_000 });
            await redlock.using([a, b], 5_000, () => pair.section(2), { waitTimeoutMs: 20_000 });
          }
        }),
      ),
    );
    expect(single.entries).toBe(60);
    expect(single.max).toBe(1);
    expect(pair.entries).toBe(60);
    expect(pair.max).toBe(1);
  }, 60_000);

  it('grants a lock over several slots all or nothing on the cluster', async () => {
    const [a, b] = twoSlots('all');
    const holder = await engine();
    const other = await engine();
    const held = await holder.redlock.acquire(b, 10_000);
    // The standalone masters may decide the round before the cluster has granted it.
    await expect.poll(() => holder.cluster.get(`redlock:{${b}}`)).toBe(held.token);
    const error = await other.redlock.acquire([a, b], 10_000, { retryCount: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockHeldError);
    await expect.poll(() => other.cluster.exists(`redlock:{${a}}`)).toBe(0);

    // The voter itself: b's slot refuses, so it answers refused, having already taken back a's grant.
    const voter = other.redlock.nodes[0] as ClusterVoter;
    const keys = [`redlock:{${a}}`, `redlock:{${b}}`, `redlock-queue:{${a}}`, `redlock-queue:{${b}}`];
    const reply = await voter.run(ACQUIRE_SCRIPT, keys, ['direct-token', 10_000, 2, '', 1, 1_000]);
    expect(reply).toEqual([0, expect.any(Number)]);
    expect(await other.cluster.exists(`redlock:{${a}}`)).toBe(0);
    expect(await other.cluster.get(`redlock:{${b}}`)).toBe(held.token);
    await held.release();
    // The release settles at a quorum: the cluster may free b a moment later.
    await expect.poll(() => other.cluster.exists(`redlock:{${b}}`)).toBe(0);
    const both = await other.redlock.acquire([a, b], 10_000);
    await expect.poll(() => other.cluster.get(`redlock:{${a}}`)).toBe(both.token);
    await expect.poll(() => other.cluster.get(`redlock:{${b}}`)).toBe(both.token);
    await both.release();
  });
});

/** What an engine warned of and reported as duplicates, from now on. */
function watch(redlock: Redlock): { duplicates: DuplicateMaster[] } {
  const duplicates: DuplicateMaster[] = [];
  redlock.on('duplicate', (duplicate: DuplicateMaster) => duplicates.push(duplicate));
  return { duplicates };
}

/** Standalone master 0 held by another owner: only the cluster could still grant `resource`. */
async function heldOnStandalone(resource: string): Promise<void> {
  const [direct] = await plainClients();
  await direct!.set(`redlock:{${resource}}`, 'another-owner', 'PX', 30_000);
}

describe('one Redis Cluster listed twice', () => {
  // Credentials in two of the forms ioredis takes for a startup node: neither may name a voter.
  const USER = 'cluster-url-user';
  const SECRET = 'cluster-url-secret';

  it('as two Cluster clients (given with credentials, other startup nodes): refused at verification, one vote, named by host and port', async () => {
    const nodes = suite.cluster().startupNodes();
    // The user exists on every node (ACLs are per node); the other connections stay the default user's.
    await Promise.all((await plainClients(suite.cluster().fleet.urls())).map((node) => node.call('ACL', 'SETUSER', USER, 'on', `>${SECRET}`, '~*', '&*', '+@all')));
    const byUrl = clusterClient([`redis://127.0.0.1:${nodes[0]!.port}?username=${USER}&password=${SECRET}` as unknown as ClusterNode, ...nodes.slice(1)]);
    const byObject = clusterClient([{ ...nodes[1]!, username: USER, password: SECRET } as ClusterNode, ...nodes.slice(2)]);
    const [standalone] = await plainClients();
    const warnings: string[] = [];
    const redlock = voters([byUrl, byObject, standalone!], { logger: { warn: (message) => warnings.push(message) } });
    const { duplicates } = watch(redlock);

    const error = await redlock.verifyMasters().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).argument).toBe('clients[1]');
    expect((error as Error).message).toBe(
      `invalid clients[1]: "cluster:127.0.0.1:${nodes[1]!.port}" (the same Redis Cluster (a node in common) as clients[0] ` +
        `(cluster:127.0.0.1:${nodes[0]!.port}); give a Redis Cluster once, as one Cluster client)`,
    );
    // Whichever answered first keeps the vote.
    expect(duplicates).toHaveLength(1);
    expect(duplicates[0]!.kind).toBe('same cluster');
    expect([duplicates[0]!.index, duplicates[0]!.sameAsIndex].sort()).toEqual([0, 1]);
    const health = await redlock.checkMasters();
    expect(health.voting).toBe(2);
    expect(health.masters.filter((master) => master.sameServerAs !== undefined && !master.votes)).toHaveLength(1);

    // With the one independent master held by another owner, the cluster (twice) must not make a quorum.
    // Fenced, so the scripted acquire runs: it counts a key that already holds our token as granted.
    await heldOnStandalone('twice');
    expect(await redlock.tryAcquire('twice', 10_000, { fencing: true })).toBeNull();
    // Held by another owner on the cluster and standalone master 0, not on master 1: the cluster's
    // refusal decides the round, and the error names it by host and port.
    const [master0, master1] = await plainClients();
    await byUrl.set('redlock:{named}', 'another-owner', 'PX', 30_000);
    await master0!.set('redlock:{named}', 'another-owner', 'PX', 30_000);
    const refused = await voters([byUrl, master0!, master1!]).acquire('named', 10_000, { retryCount: 0 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LockHeldError);
    expect([...(refused as LockHeldError).refusedBy].sort()).toEqual([`cluster:127.0.0.1:${nodes[0]!.port}`, `127.0.0.1:${suite.fleet().nodes[0]!.port}`].sort());
    const said = [(error as Error).message, (refused as Error).message, JSON.stringify(refused), JSON.stringify(health), JSON.stringify(duplicates), ...warnings].join('\n');
    expect(said).toContain(`cluster:127.0.0.1:${nodes[0]!.port}`);
    expect(said).not.toContain(SECRET);
    expect(said).not.toContain(USER);
  });

  it('as a Cluster client and a plain client of one of its masters: the plain one is the duplicate, wherever listed', async () => {
    const master = await suite.cluster().masterOf('{beside}');
    const [plain] = await plainClients([suite.cluster().fleet.nodes[master]!.url]);
    const [standalone] = await plainClients();
    const cluster = clusterClient();
    const redlock = voters([plain!, cluster, standalone!]);
    const { duplicates } = watch(redlock);

    const error = await redlock.verifyMasters().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).argument).toBe('clients[0]');
    expect((error as Error).message).toMatch(/^invalid clients\[0\]: "127\.0\.0\.1:\d+" \(a node of the Redis Cluster clients\[1\] \(cluster:127\.0\.0\.1:\d+\)/);
    expect(duplicates).toEqual([{ node: `127.0.0.1:${suite.cluster().fleet.nodes[master]!.port}`, index: 0, sameAs: redlock.nodes[1]!.name, sameAsIndex: 1, kind: 'cluster node' }]);
    const health = await redlock.checkMasters();
    expect(health.masters[0]).toMatchObject({ votes: false, sameServerAs: redlock.nodes[1]!.name });
    expect(health.masters[1]).toMatchObject({ votes: true });

    // The plain client's master serves the resource's slot: before, it and the cluster made a quorum of one server.
    await heldOnStandalone('beside');
    expect(await redlock.tryAcquire('beside', 10_000, { fencing: true })).toBeNull();
  });

  it('a Cluster node given alone as a plain master: a configuration error, and its votes never count', async () => {
    const [node] = await plainClients([suite.cluster().fleet.nodes[await suite.cluster().masterOf('{alone}')]!.url]);
    const redlock = voters([node!, ...(await plainClients())]);
    const error = await redlock.verifyMasters().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as Error).message).toMatch(/^invalid clients\[0\]: "127\.0\.0\.1:\d+" \(a Redis Cluster node \(cluster_enabled:1\) given as a plain master/);
    const health = await redlock.checkMasters();
    expect(health.masters[0]).toMatchObject({ reachable: true, votes: false, error: expect.stringMatching(/Redis Cluster node/) });
    expect(health.voting).toBe(2);
  });
});

describe('in a Nest app', () => {
  it('takes a Redis Cluster client among its nodes', async () => {
    const client = clusterClient();
    const app = await Test.createTestingModule({
      imports: [RedlockModule.forRoot({ nodes: [client, ...suite.fleet().urls()], restartQuarantineMs: false })],
    }).compile();
    await app.init();
    try {
      const redlock = app.get(RedlockService);
      expect(redlock.redlock.nodes.map((node) => node.name)[0]).toMatch(/^cluster:127\.0\.0\.1:\d+$/);
      const seen = await redlock.using('nest:1', async (_signal, lock) => {
        await expect.poll(() => client.get('redlock:{nest:1}')).toBe(lock.token);
        return true;
      });
      expect(seen).toBe(true);
    } finally {
      await app.close();
    }
  });
});

describe('shard failover under a held lock', () => {
  it('a manual CLUSTER FAILOVER: the holder keeps and extends its lock, nobody else gets it', async () => {
    const window = { restartQuarantineMs: 1_000 };
    // Older than the window, so that only a failover can quarantine them.
    await expect.poll(async () => (await ages()).every((age) => age > 1_500), { timeout: 10_000 }).toBe(true);
    const holder = await engine(window);
    const other = await engine(window);
    const lock = await holder.redlock.acquire('kept', 30_000);
    const master = await suite.cluster().masterOf('{kept}');
    await suite.cluster().failover(await suite.cluster().replicaOf(master));
    await lock.extend(30_000); // the standalone masters are a quorum; the cluster's new shard master waits
    expect(await other.redlock.tryAcquire('kept', 30_000)).toBeNull();
    await lock.release();
  }, 60_000);

  it('a shard failover changes no voter identity: a second Cluster client and a plain client of the demoted master are still found', async () => {
    const nodes = suite.cluster().startupNodes();
    const [standalone] = await plainClients();
    const before = voters([clusterClient(), clusterClient([...nodes.slice(2), ...nodes.slice(0, 2)]), standalone!]);
    await expect(before.verifyMasters()).rejects.toThrow(/the same Redis Cluster \(a node in common\) as clients\[0\]/);
    const master = await suite.cluster().masterOf('{across}');
    const [demoted] = await plainClients([suite.cluster().fleet.nodes[master]!.url]);
    const promoted = await suite.cluster().replicaOf(master);
    await suite.cluster().failover(promoted);

    // The engine that identified both before still counts the cluster once.
    await heldOnStandalone('across');
    expect(await before.tryAcquire('across', 10_000, { fencing: true })).toBeNull();
    // A new engine, given the promoted replica first: the demoted master (a replica now) is a node of its cluster.
    const after = voters([clusterClient([nodes[promoted]!]), demoted!, standalone!]);
    await expect(after.verifyMasters()).rejects.toThrow(/^invalid clients\[1\]: "127\.0\.0\.1:\d+" \(a node of the Redis Cluster clients\[0\]/);
  }, 60_000);

  it('a killed shard master whose replica lacked the key: quarantined, no second holder (and without it, one)', async () => {
    const windowMs = 1_500;
    // Held on the cluster and standalone master 0; the shard's new master lacks the key.
    const { held: lock, guarded, unguarded } = await suite.loseShard('{split}', windowMs, (holder) => holder.redlock.acquire('split', 30_000), (client) => client.exists('redlock:{split}'));

    // Guarded: master 0 refuses, master 1 grants, and the cluster's new owner of the slot is quarantined.
    const notices: QuarantineNotice[] = [];
    guarded.redlock.on('quarantine', (notice: QuarantineNotice) => notices.push(notice));
    expect(await guarded.redlock.tryAcquire('split', 30_000)).toBeNull();
    // One notice for the takeover (the shard promoted by the manual failover above may add its own, at first sight).
    const takeovers = notices.filter((notice) => notice.reason === 'run_id changed');
    expect(takeovers.map((notice) => notice.node)).toEqual([expect.stringMatching(/^cluster:127\.0\.0\.1:\d+ \(shard [0-9a-f]{12}\)$/)]);
    // Health says so: the cluster votes, but not for the resources of that shard's slots, for now.
    const health = await guarded.redlock.checkMasters();
    expect(health.masters[0]).toMatchObject({ votes: true, shardsQuarantinedForMs: expect.any(Number) });
    expect(health.masters[0]!.shardsQuarantinedForMs).toBeGreaterThan(0);
    // The control, counting the new owner at once: it and master 1 elect a second holder (once the
    // guarded engine's own attempt has been cleaned off them: that release may still be landing).
    const granted: Lock[] = [];
    await expect.poll(async () => granted.push(...[await unguarded.redlock.tryAcquire('split', 30_000)].filter((l) => l !== null)), { timeout: 5_000 }).toBeGreaterThan(0);
    expect(lock.remainingMs()).toBeGreaterThan(0);
    await granted[0]!.release();
    await lock.release();
  }, 90_000);
});
