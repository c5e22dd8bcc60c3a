import type { ConnectionOptions } from 'node:tls';
import type { MasterAddress } from '../../lock/instrumentation.js';
import { endpointName } from '../../base/redact.js';
import { connectionEndpoint, type WakeEndpoint } from './connection-endpoint.js';
import type { CommandArgument, MasterClient } from './master-client.js';

/**
 * A node-redis client (the `redis` package, v4 or v5), as far as the engine needs to tell it
 * from others: described by its shape, so that neither `redis` nor its types need be installed
 * by users of ioredis.
 */
export interface NodeRedisClient {
  /** Sends one command, its name and arguments as text. */
  sendCommand(args: string[]): Promise<unknown>;
  /** Whether `connect()` was called and the client not closed since. */
  readonly isOpen: boolean;
  /** Whether the connection can carry commands now. */
  readonly isReady: boolean;
}

/** The socket options of a node-redis client that the engine reads (v4 and v5 alike). */
interface NodeRedisSocket extends ConnectionOptions {
  host?: string;
  port?: number;
  path?: string;
  family?: number;
  tls?: boolean;
  connectTimeout?: number;
  /** v5: a boolean, with keepAliveInitialDelay; v4: the delay in ms, or false. */
  keepAlive?: boolean | number;
  keepAliveInitialDelay?: number;
  noDelay?: boolean;
  reconnectStrategy?: unknown;
  socketTimeout?: number;
}

/** What the engine uses of a node-redis client beyond NodeRedisClient. */
interface NodeRedisInternals extends NodeRedisClient {
  readonly options?: { socket?: NodeRedisSocket; username?: string; password?: string; RESP?: number; legacyMode?: boolean };
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  duplicate(overrides?: object): NodeRedisDuplicate;
}

interface NodeRedisDuplicate {
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  connect(): Promise<unknown>;
  subscribe(channel: string, listener: (message: string) => void): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  destroy?(): unknown;
  disconnect?(): Promise<unknown>;
}

/** Whether `candidate` looks like a node-redis standalone client (not a Cluster, Sentinel or pool of them). */
export function isNodeRedisClient(candidate: unknown): candidate is NodeRedisClient {
  const client = candidate as Partial<NodeRedisInternals> | null;
  return client !== null && typeof client === 'object' && typeof client.sendCommand === 'function' && typeof client.isOpen === 'boolean' && typeof (client as { duplicate?: unknown }).duplicate === 'function';
}

/**
 * Why a node-redis object cannot be a voter, or undefined when it can. Its Cluster and Sentinel
 * clients route each command themselves (by key, or to the master of the moment), and a pool
 * spreads commands over connections: the engine needs one connection whose order it controls
 * and whose server it identifies. RESP3 replies come in other shapes than the scripts' readers expect.
 */
export function nodeRedisVoterProblem(candidate: unknown): string | undefined {
  const client = candidate as Record<string, unknown> | null;
  if (client === null || typeof client !== 'object' || typeof client.sendCommand !== 'function') return undefined;
  if (typeof client.getSlotMaster === 'function' || typeof client.getMasters === 'function') {
    return 'a node-redis Cluster client (createCluster) is not supported as a voter; give an ioredis Cluster client, or node-redis clients of independent masters';
  }
  if (typeof client.getMasterNode === 'function' || typeof client.getSentinelNode === 'function') {
    return 'a node-redis Sentinel client (createSentinel) is not supported as a voter; give an ioredis client with sentinels and name, or node-redis clients of independent masters';
  }
  if ('totalClients' in client || 'idleClients' in client) {
    return 'a node-redis client pool (createClientPool) is not supported as a voter; give one client (createClient) per master';
  }
  if (!isNodeRedisClient(client)) return undefined;
  if ((client as unknown as NodeRedisInternals).options?.legacyMode === true) {
    return 'a node-redis 4 client in legacyMode is not supported (its sendCommand takes callbacks); create it without legacyMode';
  }
  if ((client as unknown as NodeRedisInternals).options?.RESP === 3) {
    return 'a node-redis client speaking RESP3 is not supported; create it with RESP: 2 (the default)';
  }
  if (!client.isOpen) return 'a node-redis client must have been opened (client.connect() called; it may still be connecting) before the engine is made over it';
  return undefined;
}

/** A node-redis client as a master. */
export class NodeRedisMaster implements MasterClient {
  readonly library = 'node-redis';
  readonly address: MasterAddress;
  readonly voterKeys: readonly string[];
  readonly sentinel = undefined;
  scriptsLoadedOn: number | undefined;
  #closes = 0;
  readonly #client: NodeRedisInternals;
  readonly #endpoint: WakeEndpoint;

  constructor(client: NodeRedisClient) {
    this.#client = client as NodeRedisInternals;
    const socket = this.#client.options?.socket ?? {};
    this.address = socketAddress(socket);
    this.voterKeys = [this.address.name];
    this.#endpoint = wakeEndpoint(this.#client);
    // node-redis emits 'reconnecting' when a ready connection breaks, in the same call as it fails
    // the requests that were waiting for a reply and before it writes any request again, on the
    // new connection; 'end' when the client is closed.
    const closed = () => void this.#closes++;
    this.#client.on('reconnecting', closed);
    this.#client.on('end', closed);
  }

  get ready(): boolean {
    return this.#client.isReady;
  }

  get closes(): number {
    return this.#closes;
  }

  evalsha(sha: string, numKeys: number, argv: readonly CommandArgument[]): Promise<unknown> {
    return this.#send(['EVALSHA', sha, numKeys], argv);
  }

  eval(source: string, numKeys: number, argv: readonly CommandArgument[]): Promise<unknown> {
    return this.#send(['EVAL', source, numKeys], argv);
  }

  command(name: string, args: readonly CommandArgument[]): Promise<unknown> {
    return this.#send([name], args);
  }

  async info(section: string): Promise<string> {
    return String(await this.#send(['INFO', section], []));
  }

  ping(): Promise<unknown> {
    return this.#send(['PING'], []);
  }

  wait(replicas: number, timeoutMs: number): Promise<unknown> {
    return this.#send(['WAIT', replicas, timeoutMs], []);
  }

  publish(channel: string, message: string): Promise<unknown> {
    return this.#send(['PUBLISH', channel, message], []);
  }

  async trySubscribe(channel: string): Promise<void> {
    // duplicate() merges options one level deep: the socket options are given whole, never to reconnect.
    const subscriber = this.#client.duplicate({ socket: { ...this.#client.options?.socket, reconnectStrategy: false } });
    subscriber.on('error', () => {});
    try {
      await subscriber.connect();
      await subscriber.subscribe(channel, () => {});
      await subscriber.unsubscribe(channel);
    } finally {
      // destroy() in v5; v4 has disconnect().
      if (subscriber.destroy) {
        try {
          subscriber.destroy();
        } catch {
          // already closed
        }
      } else await subscriber.disconnect?.().catch(() => {});
    }
  }

  wakeEndpoint(): WakeEndpoint {
    return this.#endpoint;
  }

  /**
   * One command, its head and arguments as one array (never spread: a call's arguments live on
   * the stack), numbers as their decimal text, as node-redis wants every argument as text.
   */
  #send(head: readonly CommandArgument[], args: readonly CommandArgument[]): Promise<unknown> {
    const command: string[] = new Array<string>(head.length + args.length);
    for (let i = 0; i < head.length; i++) command[i] = String(head[i]);
    for (let i = 0; i < args.length; i++) command[head.length + i] = String(args[i]);
    return this.#client.sendCommand(command);
  }
}

/** host:port or the socket path, as node-redis connects (its defaults: localhost, 6379); never credentials. */
function socketAddress(socket: NodeRedisSocket): MasterAddress {
  if (socket.path) return { name: socket.path, address: socket.path, port: undefined };
  const host = socket.host ?? 'localhost';
  const port = socket.port ?? 6379;
  return { name: endpointName(host, port), address: host, port };
}

/** Socket options node-redis reads itself; what remains of a TLS client's socket options are TLS options. */
const NOT_TLS = new Set(['host', 'port', 'path', 'family', 'tls', 'connectTimeout', 'keepAlive', 'keepAliveInitialDelay', 'noDelay', 'reconnectStrategy', 'socketTimeout']);

/**
 * The engine's wake-up connection, made as node-redis makes the client's: its address, TLS
 * options and static username and password. A client authenticated only by a
 * `credentialsProvider` of its own gives none: the subscriber is then refused (NOAUTH) and
 * waiters fall back to their timers.
 */
function wakeEndpoint(client: NodeRedisInternals): WakeEndpoint {
  const options = client.options ?? {};
  const socket = options.socket ?? {};
  const tls = socket.tls === true ? (Object.fromEntries(Object.entries(socket).filter(([key]) => !NOT_TLS.has(key))) as ConnectionOptions) : undefined;
  const keepAliveMs = socket.keepAlive === false ? 0 : typeof socket.keepAlive === 'number' ? socket.keepAlive : (socket.keepAliveInitialDelay ?? 5_000);
  return connectionEndpoint({
    ...(socket.path ? { path: socket.path } : { host: socket.host, port: socket.port, family: socket.family }),
    tls,
    username: options.username,
    password: options.password,
    connectTimeoutMs: socket.connectTimeout ?? 5_000,
    keepAliveMs,
    noDelay: socket.noDelay ?? true,
  });
}
