import { Cluster, type ClusterNode, type Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { Redlock, type RedlockOptions } from '../../lib/index.js';
import { connectMasters, disconnectAll, LOCK_CLIENT_OPTIONS } from '../support/masters.js';
import { RedisCluster } from '../support/redis-cluster.js';
import { RedisFleet } from '../support/redis-fleet.js';

/** An engine of the suite: its Cluster client (one voter) and its clients of the standalone masters. */
export interface ClusterEngine {
  readonly redlock: Redlock;
  readonly cluster: Cluster;
  readonly standalone: Redis[];
}

/**
 * A whole Redis Cluster as one voter, beside two standalone masters: three voters, quorum two.
 * The cluster has three shards with a replica each, started for the test file (the hooks are
 * registered by this call); engines and clients made through it are closed after each test.
 */
export function clusterVoterSuite() {
  let cluster: RedisCluster;
  let fleet: RedisFleet;
  const opened: { disconnect(): void }[] = [];
  const engines: Redlock[] = [];

  beforeAll(async () => {
    [cluster, fleet] = await Promise.all([RedisCluster.start({ masters: 3, replicasPerMaster: 1 }), RedisFleet.start(2)]);
  }, 90_000);

  afterEach(() => {
    for (const engine of engines.splice(0)) engine.close();
    for (const client of opened.splice(0)) client.disconnect();
  });

  afterAll(async () => {
    await Promise.all([cluster?.stopAll(), fleet?.stopAll()]);
  });

  /** A Cluster client, given `startupNodes` (default: every node, node 0 first), closed after the test. */
  function clusterClient(startupNodes: ClusterNode[] = cluster.startupNodes()): Cluster {
    const client = new Cluster(startupNodes, { enableOfflineQueue: true, redisOptions: LOCK_CLIENT_OPTIONS });
    client.on('error', () => {});
    opened.push(client);
    return client;
  }

  /** Plain clients of `urls` (default: the standalone masters), closed after the test. */
  async function plainClients(urls: readonly string[] = fleet.urls()): Promise<Redis[]> {
    const clients = await connectMasters(urls);
    opened.push(...clients);
    return clients;
  }

  /** An engine over `clients` as given, closed after the test; not verified. */
  function voters(clients: readonly (Redis | Cluster)[], options: RedlockOptions = {}): Redlock {
    const redlock = new Redlock(clients as Redis[], { restartQuarantineMs: false, nodeTimeoutMs: 1_000, logger: { warn: () => {} }, ...options });
    engines.push(redlock);
    return redlock;
  }

  async function engine(options: RedlockOptions = {}): Promise<ClusterEngine> {
    const client = clusterClient();
    const standalone = await plainClients();
    // A node timeout that rides out a starved machine: these tests count on the standalone masters' votes.
    const redlock = voters([client, ...standalone], options);
    await redlock.verifyMasters();
    return { redlock, cluster: client, standalone };
  }

  /** How long every standalone master and every shard master has been up (ms, whole seconds). */
  async function ages(): Promise<number[]> {
    const direct = await connectMasters(fleet.urls());
    try {
      const infos = await Promise.all(direct.map((client) => client.info('server')));
      const client = clusterClient();
      const clusterInfos = await Promise.all(client.nodes('master').map((node) => node.info('server')));
      return [...infos, ...clusterInfos].map((info) => Number(/uptime_in_seconds:(\d+)/.exec(info)![1]) * 1000);
    } finally {
      disconnectAll(direct);
    }
  }

  /** Every server older than `ms`: only a change of a slot's owner can still be quarantined. */
  function olderThan(ms: number): Promise<void> {
    return expect.poll(async () => (await ages()).every((age) => age > ms), { timeout: 15_000, interval: 200 }).toBe(true);
  }

  /**
   * A shard master that dies before any replica has what it granted. `hold` takes its holds on
   * the cluster and standalone master 0, a bare majority: the replica of the shard serving
   * `key` and standalone master 1 are down meanwhile. Master 1 comes back empty (as a replaced
   * machine would), two more engines read who owns each slot (`guarded` with the restart
   * quarantine's window `windowMs`, `unguarded` without), then the shard master dies and its
   * replica (empty: no persistence) takes over its slots. When this returns, every server is
   * older than the window and both engines' cluster clients see the slot's new owner, which
   * lacks `gone`.
   */
  async function loseShard<T>(
    key: string,
    windowMs: number,
    hold: (holder: ClusterEngine) => Promise<T>,
    gone: (client: Cluster) => Promise<number>,
  ): Promise<{ held: T; guarded: ClusterEngine; unguarded: ClusterEngine }> {
    await olderThan(windowMs + 500);
    const holder = await engine({ restartQuarantineMs: windowMs });
    const master = await cluster.masterOf(key);
    const replica = await cluster.replicaOf(master);
    await Promise.all([cluster.fleet.kill(replica), fleet.kill(1)]);
    const held = await hold(holder);
    await fleet.start(1);
    const guarded = await engine({ restartQuarantineMs: windowMs });
    const unguarded = await engine();
    // The guarded engine knows who owns each slot (what a failover is judged against) before it happens.
    await expect.poll(async () => (await guarded.redlock.checkMasters()).masters[0]!.votes, { timeout: 10_000 }).toBe(true);
    await cluster.fleet.kill(master);
    await cluster.fleet.start(replica, { keepData: true });
    await cluster.untilPromoted(replica);
    await olderThan(windowMs + 500);
    for (const { cluster: client } of [guarded, unguarded]) {
      await expect.poll(() => gone(client).catch((e: Error) => e.message), { timeout: 10_000 }).toBe(0);
    }
    return { held, guarded, unguarded };
  }

  return {
    cluster: () => cluster,
    fleet: () => fleet,
    clusterClient,
    plainClients,
    voters,
    engine,
    ages,
    loseShard,
  };
}
