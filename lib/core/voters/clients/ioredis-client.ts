import type { Socket } from 'node:net';
import type { Cluster, Redis, RedisKey } from 'ioredis';
import type { MasterAddress } from '../../lock/instrumentation.js';
import { addressOptions, masterAddress, voterKeys } from '../master-address.js';
import { isSentinelManaged, watchSentinels } from '../sentinel-voter.js';
import { connectionEndpoint, type ConnectionSettings, type WakeEndpoint } from './connection-endpoint.js';
import type { CommandArgument, MasterClient, SentinelWatch } from './master-client.js';

/** The ioredis options a connection is made from (the client's, or a Cluster node's). */
interface IoredisSettings {
  host?: string;
  port?: number;
  path?: string | null;
  family?: number;
  tls?: ConnectionSettings['tls'];
  username?: string | null;
  password?: string | null;
  connectTimeout?: number;
  keepAlive?: number;
  noDelay?: boolean;
  enableTLSForSentinelMode?: boolean;
}

type CommandMethod = (...args: CommandArgument[]) => Promise<unknown>;

/** Up to this many keys and arguments, a script's go to ioredis spread (see `evalsha`). */
const SPREAD_MAX = 16;

const lowerCased = new Map<string, string>();

/**
 * The method name for a command, looked up once per name: a name lower-cased per call is a new
 * string to hash on every lookup. (The method itself is looked up every call: whoever wraps
 * the client's methods later still sees every command.)
 */
function lowerCase(name: string): string {
  let lower = lowerCased.get(name);
  if (lower === undefined) {
    lower = name.toLowerCase();
    lowerCased.set(name, lower);
  }
  return lower;
}

/** An ioredis client (or Cluster client) as a master. */
export class IoredisClient implements MasterClient {
  readonly library = 'ioredis';
  readonly address: MasterAddress;
  readonly voterKeys: readonly string[];
  readonly sentinel: SentinelWatch | undefined;
  scriptsLoadedOn: number | undefined;
  #closes = 0;
  readonly #wakeEndpoint: (attempt: number) => WakeEndpoint | undefined;

  constructor(readonly client: Redis | Cluster) {
    const redis = client as Redis;
    this.address = masterAddress(redis);
    this.voterKeys = voterKeys(redis);
    const options = addressOptions(redis);
    this.sentinel = isSentinelManaged(options) ? { options, watch: () => watchSentinels(redis, options) } : undefined;
    this.#wakeEndpoint = wakeEndpointOf(client);
    client.on('close', () => void this.#closes++);
  }

  get ready(): boolean {
    return this.client.status === 'ready';
  }

  get closes(): number {
    return this.#closes;
  }

  // A lock's few keys and arguments are spread: ioredis flattens its arguments into a new array
  // anyway, fastest when none of them is an array. A tick's batch goes as one array, never
  // spread: a call's arguments live on the stack, and ioredis would spread them again on its
  // way to the socket. It flattens the array (numbers go out as their decimal text, as they
  // would as separate arguments).
  evalsha(sha: string, numKeys: number, argv: readonly CommandArgument[]): Promise<unknown> {
    return argv.length <= SPREAD_MAX ? this.client.evalsha(sha, numKeys, ...(argv as RedisKey[])) : this.client.evalsha(sha, numKeys, argv as RedisKey[]);
  }

  eval(source: string, numKeys: number, argv: readonly CommandArgument[]): Promise<unknown> {
    return argv.length <= SPREAD_MAX ? this.client.eval(source, numKeys, ...(argv as RedisKey[])) : this.client.eval(source, numKeys, argv as RedisKey[]);
  }

  /** By the client's own method of that name (`set`, `pttl`, `cluster`, `script`), as the engine always sent them. */
  command(name: string, args: readonly CommandArgument[]): Promise<unknown> {
    const method = (this.client as unknown as Record<string, CommandMethod | undefined>)[lowerCase(name)];
    // apply copies the arguments onto the stack: the array itself is not kept.
    return method ? method.apply(this.client, args as CommandArgument[]) : this.client.call(name, ...args);
  }

  info(section: string): Promise<string> {
    return this.client.info(section);
  }

  ping(): Promise<unknown> {
    return this.client.ping();
  }

  wait(replicas: number, timeoutMs: number): Promise<unknown> {
    return (this.client as Redis).wait(replicas, timeoutMs);
  }

  publish(channel: string, message: string): Promise<unknown> {
    return this.client.publish(channel, message);
  }

  async trySubscribe(channel: string): Promise<void> {
    const subscriber = (this.client as Redis).duplicate({ lazyConnect: true, retryStrategy: () => null });
    subscriber.on('error', () => {});
    try {
      await subscriber.connect();
      await subscriber.subscribe(channel);
      await subscriber.unsubscribe(channel);
    } finally {
      subscriber.disconnect();
    }
  }

  wakeEndpoint(attempt: number): WakeEndpoint | undefined {
    return this.#wakeEndpoint(attempt);
  }
}

interface ClusterLike {
  isCluster?: boolean;
  nodes(role: 'master' | 'all'): { options: IoredisSettings }[];
}

/**
 * Where the engine's wake-up connection for a voter goes: the same endpoint and credentials as
 * the voter's own client. For a plain master its address; for a Sentinel-managed one, the server
 * its client is connected to now (the master Sentinel named last); for a Redis Cluster, one of
 * its masters in turn (a PUBLISH reaches every node of a cluster).
 */
function wakeEndpointOf(client: Redis | Cluster): (attempt: number) => WakeEndpoint | undefined {
  const cluster = client as unknown as ClusterLike;
  if (cluster.isCluster === true) {
    return (attempt) => {
      const nodes = cluster.nodes('master');
      const node = nodes[attempt % Math.max(nodes.length, 1)];
      return node && endpoint(node.options);
    };
  }
  const redis = client as Redis;
  const options = redis.options as IoredisSettings;
  if (isSentinelManaged(redis.options)) {
    return () => {
      const stream = (redis as unknown as { stream?: Socket }).stream;
      if (redis.status !== 'ready' || !stream?.remoteAddress || !stream.remotePort) return undefined;
      // ioredis speaks TLS to a Sentinel-managed master only when told to.
      const tls = options.enableTLSForSentinelMode ? options.tls : undefined;
      return endpoint({ ...options, path: null, host: stream.remoteAddress, port: stream.remotePort, tls });
    };
  }
  const fixed = endpoint(options);
  return () => fixed;
}

function endpoint(options: IoredisSettings): WakeEndpoint {
  return connectionEndpoint({
    ...options,
    connectTimeoutMs: options.connectTimeout ?? 10_000,
    keepAliveMs: options.keepAlive ?? 30_000,
    noDelay: options.noDelay ?? true,
  });
}
