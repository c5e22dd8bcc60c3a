import type { Cluster, Redis } from 'ioredis';
import { ClusterVoter } from './cluster-voter.js';
import { InvalidArgumentError } from './errors.js';
import { mastersFrom, RedisNode } from './redis-node.js';
import type { ResolvedRedlockOptions } from './redlock-options.js';
import type { QuarantineNotice, RestartQuarantine } from './restart-quarantine.js';
import { ShardQuarantine } from './shard-quarantine.js';

/**
 * The voters for an engine, one per client: an independent master (standalone or Sentinel-
 * managed), or a whole Redis Cluster. Kept apart from redis-node.ts, which ClusterVoter extends.
 */
export function votersFrom(clients: Redis | readonly Redis[]): RedisNode[] {
  return mastersFrom(clients, (client) =>
    (client as unknown as { isCluster?: boolean }).isCluster === true ? new ClusterVoter(client as unknown as Cluster) : new RedisNode(client),
  );
}

/**
 * Cluster voters judge each vote by the shard master that gave it (with the restart quarantine
 * on); what cannot work with them is refused, and a lone Cluster voter is warned about once.
 */
export function prepareClusterVoters(
  nodes: readonly RedisNode[],
  options: ResolvedRedlockOptions,
  quarantine: RestartQuarantine | undefined,
  notify: (notice: QuarantineNotice) => void,
): void {
  const clusters = nodes.filter((node): node is ClusterVoter => node instanceof ClusterVoter);
  if (clusters.length === 0) return;
  if (options.replicaAcks > 0) {
    throw new InvalidArgumentError('replicaAcks', options.replicaAcks, 'not supported with a Redis Cluster voter (WAIT would reach one shard of many)');
  }
  if (quarantine) for (const voter of clusters) voter.watchShards(new ShardQuarantine(voter.name, () => quarantine.windowMs, notify));
  if (nodes.length === 1) {
    options.logger.warn(
      `redlock: ${nodes[0]!.name} is the only voter. A Redis Cluster replicates asynchronously: a shard master that ` +
        'fails before its replica has a lock key can hand that lock out again after the failover, which the restart ' +
        'quarantine only narrows. For locks that must hold through failures, use three or more independent voters.',
    );
  }
}
