import type { Cluster } from 'ioredis';
import { ClusterVoter } from './cluster-voter.js';
import { InvalidArgumentError } from '../base/errors.js';
import { RedisNode } from './redis-node.js';
import { clientProblem, masterClientOf, type RedlockClient } from './clients/clients.js';
import type { ResolvedRedlockOptions } from '../lock/redlock-options.js';
import type { QuarantineNotice, RestartQuarantine } from './restart-quarantine.js';
import { sentinelVoterProblem } from './sentinel-voter.js';
import { ShardQuarantine } from './shard-quarantine.js';

/**
 * The voters for an engine, one per client: an independent master (standalone or Sentinel-
 * managed), or a whole Redis Cluster. Kept apart from redis-node.ts, which ClusterVoter extends.
 */
export function votersFrom(clients: RedlockClient | readonly RedlockClient[]): RedisNode[] {
  return mastersFrom(clients, (client) =>
    (client as { isCluster?: boolean }).isCluster === true ? new ClusterVoter(client as Cluster) : new RedisNode(masterClientOf(client)),
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
  if (quarantine) for (const voter of clusters) voter.watchShards(new ShardQuarantine(voter.name, () => quarantine.windowMs, notify, quarantine.atFirstSight));
  if (nodes.length === 1) {
    options.logger.warn(
      `redlock: ${nodes[0]!.name} is the only voter. A Redis Cluster replicates asynchronously: a shard master that ` +
        'fails before its replica has a lock key can hand that lock out again after the failover, which the restart ' +
        'quarantine only narrows. For locks that must hold through failures, use three or more independent voters.',
    );
  }
}

/**
 * The masters for an engine, checked: at least one, each an ioredis or node-redis client the
 * engine can vote with, no client and no address twice.
 */
function mastersFrom(
  clients: RedlockClient | readonly RedlockClient[],
  voterFor: (client: RedlockClient) => RedisNode,
): RedisNode[] {
  const list = (Array.isArray(clients) ? clients : [clients]) as readonly RedlockClient[];
  if (list.length === 0) throw new InvalidArgumentError('clients', clients, 'expected at least one Redis master');
  const nodes: RedisNode[] = [];
  const seen = new Map<string, number>();
  list.forEach((client, index) => {
    const unusable = clientProblem(client);
    if (unusable) throw new InvalidArgumentError(`clients[${index}]`, client, unusable);
    if (list.indexOf(client) !== index) {
      throw new InvalidArgumentError(`clients[${index}]`, 'the same client', `already given as clients[${list.indexOf(client)}]`);
    }
    const sentinel = masterClientOf(client).sentinel?.options;
    const problem = sentinel && sentinelVoterProblem(sentinel);
    if (problem) throw new InvalidArgumentError(`clients[${index}].role`, sentinel.role, problem);
    const node = voterFor(client);
    // A Sentinel-managed master is known by each of its sentinels: sharing one is the same master.
    const names = node.client.voterKeys;
    for (const name of names) {
      const earlier = seen.get(name);
      if (earlier !== undefined) {
        // Two databases of one server are not independent masters: one crash takes both votes.
        throw new InvalidArgumentError(`clients[${index}]`, node.name, `same address as clients[${earlier}]`);
      }
    }
    for (const name of names) seen.set(name, index);
    nodes.push(node);
  });
  return nodes;
}
