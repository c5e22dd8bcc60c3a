import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@nestjs/common';
import type { Redis, RedisOptions } from 'ioredis';
import { redactCredentials } from './core/base/redact.js';
import { masterClientOf } from './core/voters/clients/clients.js';
import type { NodeRedisClient } from './core/voters/clients/node-redis-client.js';
import { RedlockConfigError } from './errors/redlock-config.error.js';

/** A connection the module opened, whichever library made it: what the module does with it. */
export interface OwnedConnection {
  readonly client: NodeRedisClient | Redis;
  /** Resolves once the connection is ready or has failed once, or after `ms`. Never rejects. */
  settled(ms: number): Promise<void>;
  /** Closes it, politely first, at once if the master does not answer within `graceMs`. */
  close(graceMs: number): Promise<void>;
}

/**
 * Applied to ioredis connections the module creates, unless the node's own options say otherwise.
 * Without an offline queue a dead master fails a lock round at once instead of holding the
 * command until it reconnects; one retry per request keeps a flapping master from stalling it.
 * Auto-pipelining lets concurrent acquisitions of different keys share round trips.
 */
const IOREDIS_DEFAULTS: RedisOptions = { enableOfflineQueue: false, maxRetriesPerRequest: 1, enableAutoPipelining: true };

/**
 * An ioredis connection for a master given by URL or ioredis options. ioredis is loaded here
 * only, so an app whose masters are all node-redis never needs it installed.
 */
export async function openIoredis(target: string | RedisOptions, label: string, logger: Logger): Promise<OwnedConnection> {
  const { Redis } = await load(() => import('ioredis'), label, 'ioredis', 'ioredis');
  const client: Redis = typeof target === 'string' ? new Redis(target, { ...IOREDIS_DEFAULTS, lazyConnect: false }) : new Redis({ ...IOREDIS_DEFAULTS, ...target, lazyConnect: false });
  reportOutages(client, logger);
  return {
    client,
    settled: (ms) => settled(client, () => client.status === 'ready', ms),
    async close(graceMs) {
      if (client.status !== 'end') {
        await Promise.race([client.quit().catch(() => undefined), sleep(graceMs, undefined, { ref: false })]);
      }
      // Also stops a client that is between reconnection attempts from trying again.
      client.disconnect();
    },
  };
}

/** What the module uses of a client of `redis` it made. */
interface OwnedNodeRedis extends NodeRedisClient, Events {
  connect(): Promise<unknown>;
  close?(): Promise<unknown>;
  quit?(): Promise<unknown>;
  destroy?(): unknown;
  disconnect?(): Promise<unknown>;
}

/**
 * A node-redis client for a master given by URL (`client: 'node-redis'`), configured as the
 * ioredis ones are: no offline queue, so a dead master fails a lock round at once instead of
 * holding the command until it reconnects; reconnection within half a second. `redis` is loaded
 * here only, so an app on ioredis never needs it installed.
 */
export async function openNodeRedis(url: string, label: string, logger: Logger): Promise<OwnedConnection> {
  const redis = await load(() => import('redis'), label, 'node-redis', 'redis');
  const client = redis.createClient({
    url,
    disableOfflineQueue: true,
    socket: { reconnectStrategy: (retries: number) => Math.min(retries * 20, 500) },
  }) as unknown as OwnedNodeRedis;
  reportOutages(client, logger);
  // It retries by itself until it reaches the master: a master that is down must not fail bootstrap.
  client.connect().catch(() => {});
  return {
    client,
    settled: (ms) => settled(client, () => client.isReady, ms),
    async close(graceMs) {
      if (!client.isOpen) return;
      // close() in v5 (quit() is deprecated there); quit() in v4.
      const polite = client.close ? client.close() : client.quit?.();
      await Promise.race([polite?.catch(() => undefined), sleep(graceMs, undefined, { ref: false })]);
      if (!client.isOpen) return;
      if (client.destroy) client.destroy();
      else await client.disconnect?.().catch(() => undefined);
    },
  };
}

async function load<T>(importer: () => Promise<T>, label: string, library: string, name: string): Promise<T> {
  try {
    return await importer();
  } catch {
    throw new RedlockConfigError(`${label}: connecting with ${library} needs the ${name} package, which cannot be loaded; install it (npm install ${name})`);
  }
}

/** The events both libraries emit that the module listens to. */
interface Events {
  on(event: string, listener: (...args: any[]) => void): unknown;
  off(event: string, listener: (...args: any[]) => void): unknown;
}

/** One warning per outage rather than one per reconnection attempt. */
function reportOutages(client: (Redis | OwnedNodeRedis) & Events, logger: Logger): void {
  const name = masterClientOf(client).address.name;
  let down = false;
  client.on('error', (error: unknown) => {
    if (down) return;
    down = true;
    logger.warn(`Redis master ${name} unavailable: ${redactCredentials(error instanceof Error ? error.message : String(error))}`);
  });
  client.on('ready', () => {
    if (!down) return;
    down = false;
    logger.log(`Redis master ${name} is back`);
  });
}

/** Resolves once the client is ready or has failed once, or after `ms`. Never rejects. */
function settled(client: Events, ready: () => boolean, ms: number): Promise<void> {
  if (ready()) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const events = ['ready', 'error', 'end'];
    const done = () => {
      clearTimeout(timer);
      for (const event of events) client.off(event, done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    timer.unref();
    for (const event of events) client.on(event, done);
  });
}
