import { Cluster, type ClusterOptions, type Redis } from 'ioredis';
import { lockClient, untilReady } from '../../support/masters.js';
import type { ClusterVoterConfig, WorkerConfig } from './protocol.js';

/**
 * Lock clients for the voters a safety worker (or the test process) is given: a Redis Cluster
 * voter becomes an ioredis `Cluster` client, configured as docs/production.md shows a lock user doing
 * it; every other voter a plain lock client (test/support/masters.ts).
 */

/** The README's Cluster configuration: no offline queue, one retry per request. */
export const CLUSTER_LOCK_OPTIONS: ClusterOptions = {
  enableOfflineQueue: false,
  redisOptions: { maxRetriesPerRequest: 1 },
};

export function isClusterVoter(voter: unknown): voter is ClusterVoterConfig {
  return typeof voter === 'object' && voter !== null && Array.isArray((voter as ClusterVoterConfig).cluster);
}

/** A Cluster lock client, not connected yet; typed as the engine takes it (one voter). */
export function clusterLockClient(voter: ClusterVoterConfig): Redis {
  const client = new Cluster(voter.cluster, CLUSTER_LOCK_OPTIONS);
  // A shard master down during a test is expected; failed commands still reject.
  client.on('error', () => {});
  return client as unknown as Redis;
}

/** One client per voter, once every one is ready (a Cluster client: once it has read the slot map). */
export async function connectSafetyVoters(voters: NonNullable<WorkerConfig['voters']>): Promise<Redis[]> {
  const clients = voters.map((voter) => (isClusterVoter(voter) ? clusterLockClient(voter) : lockClient(voter)));
  await Promise.all(clients.map(untilReady));
  return clients;
}
