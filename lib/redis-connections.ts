import { Logger } from '@nestjs/common';
import type { Redis, RedisOptions } from 'ioredis';
import { nodeName, voterKeys } from './core/voters/master-address.js';
import type { RedlockClientLibrary, RedlockNode } from './redlock.interfaces.js';
import { RedlockConfigError } from './errors/redlock-config.error.js';
import { clientProblem, masterClientOf, type RedlockClient } from './core/voters/clients/clients.js';
import { isNodeRedisClient } from './core/voters/clients/node-redis-client.js';
import { openIoredis, openNodeRedis, type OwnedConnection } from './owned-connections.js';

/** Bootstrap waits this long at most for the masters to connect, so the first lock does not race them. */
const READY_WAIT_MS = 5_000;
/** A QUIT that gets no answer (master down) must not hold shutdown up. */
const QUIT_GRACE_MS = 1_000;

/** `addresses`: the names that mean this master (its address, or each of its sentinels). */
type Parsed =
  | { index: number; kind: 'url'; url: string; addresses: string[] }
  | { index: number; kind: 'options'; options: RedisOptions; addresses: string[] }
  | { index: number; kind: 'client'; client: RedlockClient; addresses: string[] };

/**
 * The module's Redis masters: turns `options.nodes` into clients (ioredis, or node-redis for
 * URLs with `client: 'node-redis'`) after validating every entry, and closes at shutdown the
 * connections it opened (never the clients it was given).
 */
export class RedisConnections {
  readonly #owned: OwnedConnection[];
  #closing: Promise<void> | undefined;

  private constructor(
    /** One client per master, in `options.nodes` order. */
    readonly clients: readonly RedlockClient[],
    owned: OwnedConnection[],
  ) {
    this.#owned = owned;
  }

  /**
   * Validates all nodes before connecting to any (so a mistake leaves no socket open), connects,
   * and waits a bounded time for the new connections to settle. Masters that are down do not
   * fail bootstrap: Redlock works while a majority is up.
   */
  static async open(nodes: readonly RedlockNode[], logger = new Logger('Redlock'), library: RedlockClientLibrary = 'ioredis'): Promise<RedisConnections> {
    const parsed = nodes.map((node, index) => parseNode(node, index, library));
    const seen = new Map<string, number>();
    for (const node of parsed) {
      for (const address of node.addresses) {
        const earlier = seen.get(address);
        if (earlier !== undefined && earlier !== node.index) {
          // Two connections to one server are not independent masters: one crash takes both votes.
          throw new RedlockConfigError(
            `RedlockModule: options.nodes[${node.index}] and options.nodes[${earlier}] are the same master ` +
              `(${address}); Redlock needs independent masters`,
          );
        }
        seen.set(address, node.index);
      }
    }
    const owned: OwnedConnection[] = [];
    const clients: RedlockClient[] = [];
    for (const node of parsed) {
      if (node.kind === 'client') {
        clients.push(node.client);
        continue;
      }
      const label = `RedlockModule: options.nodes[${node.index}]`;
      const connection =
        node.kind === 'url' && library === 'node-redis'
          ? await openNodeRedis(node.url, label, logger)
          : await openIoredis(node.kind === 'url' ? node.url : node.options, label, logger);
      owned.push(connection);
      clients.push(connection.client);
    }
    await Promise.all(owned.map((connection) => connection.settled(READY_WAIT_MS)));
    return new RedisConnections(clients, owned);
  }

  /** Connections this module opened and will close. */
  get owned(): readonly RedlockClient[] {
    return this.#owned.map((connection) => connection.client);
  }

  /** QUITs every owned connection, disconnecting those that do not answer in time. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= Promise.all(this.#owned.map((connection) => connection.close(QUIT_GRACE_MS))).then(() => undefined);
    return this.#closing;
  }
}

function parseNode(node: unknown, index: number, library: RedlockClientLibrary): Parsed {
  const label = `RedlockModule: options.nodes[${index}]`;
  if (typeof node === 'string') return { index, kind: 'url', url: node, addresses: [urlAddress(node, label)] };
  if (node === null || typeof node !== 'object' || Array.isArray(node)) {
    throw new RedlockConfigError(
      `${label} must be a redis:// or rediss:// URL, an ioredis options object, an ioredis client or a node-redis client (got ${describe(node)})`,
    );
  }
  // A Redis Cluster client is one voter: the whole cluster counts once.
  if (isClient(node)) return { index, kind: 'client', client: node, addresses: voterKeys(node) };
  // A node-redis object (a client, or a Cluster, Sentinel or pool, which cannot vote): told why here, before any connection.
  if (typeof (node as { sendCommand?: unknown }).sendCommand === 'function') {
    const problem = clientProblem(node);
    if (problem || !isNodeRedisClient(node)) throw new RedlockConfigError(`${label}: ${problem ?? 'expected a node-redis client'}`);
    return { index, kind: 'client', client: node, addresses: [...masterClientOf(node).voterKeys] };
  }
  if (library === 'node-redis') {
    throw new RedlockConfigError(
      `${label} is an options object, which the module reads as ioredis options; with options.client 'node-redis', give a URL or a node-redis client you created`,
    );
  }
  const options = node as RedisOptions;
  if ((options as { sentinels?: unknown }).sentinels != null) {
    checkSentinels(options, label);
  } else {
    checkAddress(options, label);
    if ((options as { name?: unknown }).name != null) {
      throw new RedlockConfigError(`${label}.name names a master monitored by Sentinel, but no sentinels are given`);
    }
  }
  return { index, kind: 'options', options, addresses: voterKeys({ options } as unknown as Redis) };
}

/** ioredis takes `port: 'abc'` and connects somewhere unexpected (or nowhere) without a word. */
function checkAddress(options: RedisOptions, label: string): void {
  const { host, port, path } = options as { host?: unknown; port?: unknown; path?: unknown };
  if (port !== undefined && !(typeof port === 'number' && Number.isInteger(port) && port > 0 && port < 65_536)) {
    throw new RedlockConfigError(`${label}.port must be an integer in [1, 65535] (got ${describe(port)})`);
  }
  if (host !== undefined && (typeof host !== 'string' || host.length === 0)) {
    throw new RedlockConfigError(`${label}.host must be a non-empty string (got ${describe(host)})`);
  }
  if (path !== undefined && (typeof path !== 'string' || path.length === 0)) {
    throw new RedlockConfigError(`${label}.path must be a non-empty string (got ${describe(path)})`);
  }
}

/**
 * A Sentinel-managed master (ioredis `sentinels` + `name`): ioredis would ignore host, port and
 * path beside them, throw an untyped error for a missing name, and reach a replica with
 * `role: 'slave'`, which no lock can be written to. No value is echoed: passwords sit beside them.
 */
function checkSentinels(options: RedisOptions, label: string): void {
  const { sentinels, name, role, sentinelPassword } = options as Record<string, unknown>;
  const shape = 'a non-empty array of { host, port } (the Sentinels that monitor this master)';
  if (!Array.isArray(sentinels) || sentinels.length === 0) {
    throw new RedlockConfigError(`${label}.sentinels must be ${shape} (got ${describe(sentinels)})`);
  }
  sentinels.forEach((sentinel: unknown, at) => {
    if (sentinel === null || typeof sentinel !== 'object' || Array.isArray(sentinel)) {
      throw new RedlockConfigError(`${label}.sentinels[${at}] must be a { host, port } object (got ${describe(sentinel)})`);
    }
    checkAddress(sentinel as RedisOptions, `${label}.sentinels[${at}]`);
  });
  if (typeof name !== 'string' || name.length === 0) {
    throw new RedlockConfigError(
      `${label}.name must be the name under which the Sentinels monitor this master (got ${describe(name)})`,
    );
  }
  const direct = (['host', 'port', 'path'] as const).filter((key) => (options as Record<string, unknown>)[key] !== undefined);
  if (direct.length > 0) {
    throw new RedlockConfigError(
      `${label} gives ${direct.join(', ')} beside sentinels; ioredis asks the Sentinels where the master is and ` +
        `ignores ${direct.length === 1 ? 'it' : 'them'}: give either sentinels and name, or the master's address`,
    );
  }
  if (role !== undefined && role !== 'master') {
    throw new RedlockConfigError(`${label}.role must be "master" (the default): a replica refuses the writes a lock needs`);
  }
  if (sentinelPassword !== undefined && sentinelPassword !== null && typeof sentinelPassword !== 'string') {
    throw new RedlockConfigError(`${label}.sentinelPassword must be a string (got ${describe(sentinelPassword)})`);
  }
}

/** Duck-typed so a client from another copy of ioredis (a v5 peer) is recognised too. */
function isClient(node: object): node is Redis {
  const candidate = node as Partial<Redis>;
  return typeof candidate.evalsha === 'function' && typeof candidate.status === 'string';
}

/**
 * Checks the URL before ioredis sees it (ioredis is lenient and would connect somewhere odd).
 * No part of the input is echoed: a malformed URL may put the password anywhere.
 */
function urlAddress(text: string, label: string): string {
  const invalid = (why: string) =>
    new RedlockConfigError(`${label} is not a valid Redis URL: ${why}; expected redis[s]://[user:password@]host[:port][/db]`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw invalid('it does not parse as a URL');
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') throw invalid('the scheme must be redis:// or rediss://');
  if (!url.hostname) throw invalid('the host is missing');
  if (url.pathname !== '' && url.pathname !== '/' && !/^\/\d+$/.test(url.pathname)) {
    throw invalid('the path must be a database number');
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return nodeName({ options: { host, port: url.port ? Number(url.port) : 6379 } } as unknown as Redis);
}

/** What kind of value it was, never the value: options may carry a password anywhere. */
function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return 'a string';
  if (typeof value === 'number') return 'a number';
  return typeof value;
}
