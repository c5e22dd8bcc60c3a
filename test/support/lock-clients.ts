import { once } from 'node:events';
import type { Redis } from 'ioredis';
import { createClient } from 'redis';
import { createClient as createClientV4 } from 'redis4';
import type { RedlockClient } from '../../lib/core/voters/clients/clients.js';
import { Redlock, type RedlockOptions } from '../../lib/index.js';
import { connectMasters, FRESH_FLEET, lockClient, separateEngine, untilReady } from './masters.js';

/**
 * The client libraries the engine is proven on: tests that touch the wire run once per library,
 * the engine's own clients made by it (the test's probes of the masters stay ioredis: they are
 * the harness, not the client under test). node-redis 4 is the `redis4` devDependency (an alias
 * of redis@4).
 */
export const EVERY_CLIENT_VERSION = ['ioredis', 'node-redis', 'node-redis-4'] as const;
export type ClientLibrary = (typeof EVERY_CLIENT_VERSION)[number];

/**
 * The two libraries, node-redis at the installed major (5): what every suite that touches the wire
 * runs on. node-redis 4 runs the core guarantees' suites (EVERY_CLIENT_VERSION: mutual exclusion,
 * faults, fencing and the restart quarantine); tripling every suite made the whole run slow
 * enough, beside a second copy of it, for timing-bound assertions to fail.
 */
export const CLIENT_LIBRARIES = ['ioredis', 'node-redis'] as const satisfies readonly ClientLibrary[];

/** The libraries the Nest module connects URLs with (options.client): node-redis is the installed `redis`, v5. */
export const MODULE_CLIENT_LIBRARIES = ['ioredis', 'node-redis'] as const satisfies readonly ClientLibrary[];

type NodeRedis = ReturnType<typeof createClient>;

/** node-redis options as both majors take them for what the tests set. */
type NodeRedisOptions = Parameters<typeof createClient>[0] & Parameters<typeof createClientV4>[0];

/** Spread into a new object per client: node-redis writes a URL's host and port into the socket options it is given. */
const RECONNECT = { reconnectStrategy: (retries: number) => Math.min(retries * 20, 200) };

/**
 * A node-redis client (v5, or v4 with `major` 4) as a lock user should configure it, as
 * LOCK_CLIENT_OPTIONS does for ioredis: no offline queue (a dead master fails the request at
 * once), quick reconnection.
 */
export function nodeRedisLockClient(url: string, major: 4 | 5 = 5): NodeRedis {
  return nodeRedisClient({ url, socket: { ...RECONNECT } }, major);
}

function nodeRedisClient(options: NodeRedisOptions, major: 4 | 5): NodeRedis {
  const settings = { ...options, disableOfflineQueue: true };
  const client = (major === 4 ? createClientV4(settings) : createClient(settings)) as NodeRedis;
  // Reconnection errors while a test has a master down are expected; failed commands still reject.
  client.on('error', () => {});
  return client;
}

const majorOf = (library: Exclude<ClientLibrary, 'ioredis'>) => (library === 'node-redis-4' ? 4 : 5);

/** One lock client of `library` per URL, once all are ready. */
export async function connectLockClients(library: ClientLibrary, urls: readonly string[]): Promise<RedlockClient[]> {
  if (library === 'ioredis') {
    const clients = urls.map((url) => lockClient(url));
    await Promise.all(clients.map(untilReady));
    return clients;
  }
  const clients = urls.map((url) => nodeRedisLockClient(url, majorOf(library)));
  await Promise.all(clients.map((client) => client.connect()));
  return clients as unknown as RedlockClient[];
}

/** Resolves when the client can take commands again (both reconnect by themselves after a restart). */
export async function untilLockClientReady(client: RedlockClient): Promise<void> {
  if (isNodeRedis(client)) {
    if (!client.isReady) await once(client as unknown as NodeRedis, 'ready');
    return;
  }
  await untilReady(client as Redis);
}

/**
 * separateEngine on `library`: an engine with connections of its own, and the test's view of the
 * same masters. On ioredis `clients` are the engine's own (as separateEngine gives them); on
 * node-redis they are ioredis probes beside it. `lockClients` are the engine's, for watchCalls.
 */
export async function separateEngineOn(
  library: ClientLibrary,
  urls: readonly string[],
  opened: (Redis | RedlockClient)[],
  options: RedlockOptions = {},
): Promise<{ redlock: Redlock; clients: Redis[]; lockClients: RedlockClient[] }> {
  if (library === 'ioredis') {
    const engine = await separateEngine(urls, opened, options);
    return { ...engine, lockClients: engine.clients };
  }
  const lockClients = await connectLockClients(library, urls);
  const clients = await connectMasters(urls);
  opened.push(...lockClients, ...clients);
  const redlock = new Redlock(lockClients, { ...FRESH_FLEET, ...options });
  // Identified before its first round, so its takes all go out at once, as a long-lived engine's do.
  await redlock.verifyMasters();
  return { redlock, clients, lockClients };
}

function isNodeRedis(client: RedlockClient): client is RedlockClient & { isOpen: boolean; isReady: boolean } {
  return typeof (client as { sendCommand?: unknown }).sendCommand === 'function' && typeof (client as { isOpen?: unknown }).isOpen === 'boolean';
}

/**
 * Breaks the client's connection as a network fault would, and lets it reconnect by itself:
 * ioredis by its own reconnecting disconnect, node-redis by the server killing its connection.
 */
export async function dropConnection(client: RedlockClient): Promise<void> {
  if (!isNodeRedis(client)) {
    (client as Redis).disconnect(true);
    return;
  }
  const nodeRedis = client as unknown as NodeRedis;
  const id = await nodeRedis.sendCommand(['CLIENT', 'ID']);
  // Not events.once: the 'error' that comes first would reject it.
  const closed = new Promise<void>((resolve) => nodeRedis.once('reconnecting', () => resolve()));
  // Its own connection (SKIPME no): the reply may never come, the connection is gone first.
  void nodeRedis.sendCommand(['CLIENT', 'KILL', 'ID', String(id), 'SKIPME', 'no']).catch(() => {});
  await closed;
}

/** Where and as whom a lock client connects, said once for both libraries. */
export interface LockClientSettings {
  host?: string;
  port?: number;
  path?: string;
  /** TLS, trusting this CA. */
  ca?: Buffer;
  username?: string;
  password?: string;
}

/**
 * A lock client of `library` made from settings rather than a URL, each library's way (ioredis
 * options; node-redis socket options with its credentials beside them); connected and ready
 * unless `connect` is false.
 */
export async function lockClientWith(library: ClientLibrary, settings: LockClientSettings, connect = true): Promise<RedlockClient> {
  const { host, port, path, ca, username, password } = settings;
  if (library === 'ioredis') {
    const client = lockClient({ ...(path ? { path } : { host, port }), ...(ca ? { tls: { ca } } : {}), username, password, lazyConnect: !connect });
    if (connect) await untilReady(client);
    return client;
  }
  const socket = path ? { path } : ca ? { host, port, tls: true as const, ca } : { host, port };
  const client = nodeRedisClient({ socket: { ...socket, ...RECONNECT }, username, password } as NodeRedisOptions, majorOf(library));
  if (connect) await client.connect();
  return client as unknown as RedlockClient;
}
