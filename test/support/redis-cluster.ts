import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { RedisFleet } from './redis-fleet.js';

/**
 * A real Redis Cluster for tests: `masters` shards, each with `replicasPerMaster` replicas, on
 * loopback ports of its own (the cluster bus too), created with `redis-cli --cluster create`.
 * Shard masters can be failed over (CLUSTER FAILOVER on a replica) or killed (a replica takes
 * over once the others agree the master is down, after `nodeTimeoutMs`).
 */
export interface ClusterOptions {
  masters?: number;
  replicasPerMaster?: number;
  /** cluster-node-timeout: how long until a silent master is failed over. Default 1000. */
  nodeTimeoutMs?: number;
}

const READY_TIMEOUT_MS = 30_000;
/** Redis's own limit for a manual failover (cluster-manual-failover timeout, 5 s), and some. */
const MANUAL_FAILOVER_MS = 8_000;

export class RedisCluster {
  private constructor(
    readonly fleet: RedisFleet,
    private readonly admin: Redis[],
  ) {}

  static async start({ masters = 3, replicasPerMaster = 1, nodeTimeoutMs = 1_000 }: ClusterOptions = {}): Promise<RedisCluster> {
    const count = masters * (1 + replicasPerMaster);
    const fleet = await RedisFleet.start(count, {
      extraArgs: [
        ...['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', String(nodeTimeoutMs)],
        // A replica cut off for a while (a test pauses one) may still take over its master's slots.
        ...['--cluster-replica-validity-factor', '0'],
      ],
      clusterBus: true,
    });
    const admin = fleet.urls().map((url) => {
      const client = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: true });
      client.on('error', () => {});
      return client;
    });
    const cluster = new RedisCluster(fleet, admin);
    try {
      const addresses = fleet.nodes.map((node) => `127.0.0.1:${node.port}`);
      await promisify(execFile)(
        'redis-cli',
        ['--cluster', 'create', ...addresses, '--cluster-replicas', String(replicasPerMaster), '--cluster-yes'],
        { timeout: READY_TIMEOUT_MS },
      );
      await cluster.untilHealthy();
    } catch (error) {
      await cluster.stopAll();
      throw error;
    }
    return cluster;
  }

  /** What an ioredis Cluster client is given to find the cluster. */
  startupNodes(): { host: string; port: number }[] {
    return this.fleet.nodes.map((node) => ({ host: '127.0.0.1', port: node.port }));
  }

  /** Index (in the fleet) of every node that is a master now, as the live nodes see it. */
  async masters(): Promise<number[]> {
    const roles = await Promise.all(
      this.fleet.nodes.map(async (node, index) => (node.running ? ((await this.admin[index]!.role().catch(() => []))[0] as string) : 'down')),
    );
    return roles.flatMap((role, index) => (role === 'master' ? [index] : []));
  }

  /** Index of the master serving `key` now. */
  async masterOf(key: string): Promise<number> {
    const slot = await this.live().cluster('KEYSLOT', key);
    const shards = await this.live().cluster('SLOTS');
    const shard = shards.find(([from, to]) => slot >= from && slot <= to);
    if (!shard?.[2]) throw new Error(`no shard serves slot ${slot}`);
    const port = shard[2][1];
    return this.fleet.nodes.findIndex((node) => node.port === port);
  }

  /** Index of a replica of the master at `masterIndex`. */
  async replicaOf(masterIndex: number): Promise<number> {
    const port = this.fleet.nodes[masterIndex]!.port;
    for (const [index, client] of this.admin.entries()) {
      if (!this.fleet.nodes[index]!.running) continue;
      const info = await client.info('replication').catch(() => '');
      if (info.includes('role:slave') && info.includes(`master_port:${port}`)) return index;
    }
    throw new Error(`master ${masterIndex} has no live replica`);
  }

  /** A graceful, manual failover: the replica catches up, then takes over the master's slots. */
  async failover(replicaIndex: number): Promise<void> {
    const promoted = async () => (await this.admin[replicaIndex]!.role())[0] === 'master';
    // A manual failover gives up by itself when the master does not answer in time (a starved
    // machine): asked again until it happens, within the usual deadline.
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (!(await promoted().catch(() => false))) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for node ${replicaIndex} to become master`);
      await this.admin[replicaIndex]!.cluster('FAILOVER').catch(() => {});
      const askedAt = Date.now();
      while (Date.now() - askedAt < MANUAL_FAILOVER_MS && !(await promoted().catch(() => false))) await sleep(50);
    }
    await this.untilHealthy();
    await this.untilEveryoneSees(replicaIndex);
  }

  /** Every live node's slot map names `index` as a master: answers about who serves a key are then the same whoever is asked. */
  private async untilEveryoneSees(index: number): Promise<void> {
    const port = this.fleet.nodes[index]!.port;
    await this.until(async () => {
      const maps = await Promise.all(
        this.fleet.nodes.flatMap((node, i) => (node.running ? [this.admin[i]!.cluster('SLOTS')] : [])),
      );
      return maps.every((shards) => shards.some((shard) => shard[2]?.[1] === port));
    }, `every node to see node ${index} as a master`);
  }

  /** SIGKILL a master; resolves once one of its replicas has taken over and the cluster is ok. */
  async killMaster(masterIndex: number): Promise<number> {
    const replica = await this.replicaOf(masterIndex);
    await this.fleet.kill(masterIndex);
    await this.until(async () => (await this.admin[replica]!.role())[0] === 'master', `replica ${replica} to take over`);
    await this.untilHealthy();
    return replica;
  }

  /** Resolves once the node at `index` is a master and the cluster is ok again. */
  async untilPromoted(index: number): Promise<void> {
    await this.until(async () => (await this.admin[index]!.role())[0] === 'master', `node ${index} to be promoted`);
    await this.untilHealthy();
    await this.untilEveryoneSees(index);
  }

  /** Every live node says cluster_state:ok and knows all slots. */
  async untilHealthy(): Promise<void> {
    let last: string[] = [];
    await this.until(async () => {
      const infos = await Promise.all(
        this.fleet.nodes.map((node, index) =>
          node.running ? this.admin[index]!.cluster('INFO').then(String, (error: Error) => error.message) : Promise.resolve('down'),
        ),
      );
      last = infos.map((info, index) => `${index}: ${/cluster_state:\w+/.exec(info)?.[0] ?? info} ${/cluster_slots_ok:\d+/.exec(info)?.[0] ?? ''}`);
      return infos.every((info) => info === 'down' || (info.includes('cluster_state:ok') && info.includes('cluster_slots_ok:16384')));
    }, () => `the cluster to be ok (${last.join('; ')})`);
  }

  async stopAll(): Promise<void> {
    for (const client of this.admin) client.disconnect();
    await this.fleet.stopAll();
  }

  private live(): Redis {
    const index = this.fleet.nodes.findIndex((node) => node.running);
    return this.admin[index]!;
  }

  private async until(check: () => Promise<boolean>, what: string | (() => string)): Promise<void> {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      if (await check().catch(() => false)) return;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
      await sleep(50);
    }
  }
}
