import type { Cluster, Redis } from 'ioredis';
import { IoredisClient } from './ioredis-client.js';
import type { MasterClient } from './master-client.js';
import { isNodeRedisClient, NodeRedisMaster, nodeRedisVoterProblem, type NodeRedisClient } from './node-redis-client.js';

/**
 * A client the engine accepts as a master: an ioredis client (a Cluster client counts as one
 * voter) or a connected node-redis client (`createClient()` of `redis` v4 or v5).
 */
export type RedlockClient = Redis | Cluster | NodeRedisClient;

/**
 * One adapter per client object, whatever the number of engines made over it: node-redlock's users
 * often make one per call, and a listener per engine would stay on the client for ever.
 */
const adapters = new WeakMap<object, MasterClient>();

/** The adapter of a client already checked by `clientProblem`. */
export function masterClientOf(client: RedlockClient): MasterClient {
  let adapter = adapters.get(client);
  if (!adapter) {
    adapter = isIoredis(client) ? new IoredisClient(client) : new NodeRedisMaster(client as NodeRedisClient);
    adapters.set(client, adapter);
  }
  return adapter;
}

/** Why `candidate` cannot be a master's client, or undefined when it can. */
export function clientProblem(candidate: unknown): string | undefined {
  if (isIoredis(candidate)) return undefined;
  const problem = nodeRedisVoterProblem(candidate);
  if (problem) return problem;
  return isNodeRedisClient(candidate) ? undefined : 'expected an ioredis client or a node-redis client';
}

/** ioredis's clients (and Cluster clients, from any copy of ioredis) have lower-case command methods; node-redis's have none of these. */
function isIoredis(candidate: unknown): candidate is Redis | Cluster {
  const client = candidate as Partial<Redis> | null;
  return client !== null && typeof client === 'object' && typeof client.evalsha === 'function' && typeof client.status === 'string';
}
