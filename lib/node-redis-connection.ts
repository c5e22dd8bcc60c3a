import type { Logger } from '@nestjs/common';
import { redactCredentials } from './core/base/redact.js';
import { masterClientOf } from './core/voters/clients/clients.js';
import type { NodeRedisClient } from './core/voters/clients/node-redis-client.js';
import { RedlockConfigError } from './errors/redlock-config.error.js';

/** A connection the module opened, whichever library made it: what the module does with it. */
export interface OwnedConnection {
  readonly client: NodeRedisClient | import('ioredis').Redis;
  /** Resolves once the connection is ready or has failed once, or after `ms`. Never rejects. */
  settled(ms: number): Promise<void>;
  /** Closes it, politely first, at once if the master does not answer within `graceMs`. */
  close(graceMs: number): Promise<void>;
}

/** What the module uses of a client of `redis` it made. */
interface OwnedNodeRedis extends NodeRedisClient {
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  off(event: string, listener: (...args: unknown[]) => void): unknown;
  connect(): Promise<unknown>;
  close?(): Promise<unknown>;
  quit?(): Promise<unknown>;
  destroy?(): unknown;
  disconnect?(): Promise<unknown>;
}

/**
 * A node-redis client for a master given by URL (`client: 'node-redis'`), configured as the
 * module configures its ioredis ones: no offline queue, so a dead master fails a lock round at
 * once instead of holding the command until it reconnects; reconnection within half a second.
 * `redis` is loaded here only, so an app on ioredis never needs it installed.
 */
export async function openNodeRedis(url: string, label: string, logger: Logger): Promise<OwnedConnection> {
  let redis: typeof import('redis');
  try {
    redis = await import('redis');
  } catch {
    throw new RedlockConfigError(`${label}: options.client is 'node-redis', but the redis package cannot be loaded; install it (npm install redis)`);
  }
  const client = redis.createClient({
    url,
    disableOfflineQueue: true,
    socket: { reconnectStrategy: (retries: number) => Math.min(retries * 20, 500) },
  }) as unknown as OwnedNodeRedis;
  const name = masterClientOf(client).address.name;
  let down = false;
  client.on('error', (error) => {
    if (down) return;
    down = true;
    logger.warn(`Redis master ${name} unavailable: ${redactCredentials(error instanceof Error ? error.message : String(error))}`);
  });
  client.on('ready', () => {
    if (!down) return;
    down = false;
    logger.log(`Redis master ${name} is back`);
  });
  // It retries by itself until it reaches the master: a master that is down must not fail bootstrap.
  client.connect().catch(() => {});
  return {
    client,
    settled: (ms) => settled(client, ms),
    async close(graceMs) {
      if (!client.isOpen) return;
      // close() in v5 (quit() is deprecated there); quit() in v4.
      const polite = client.close ? client.close() : client.quit?.();
      await Promise.race([polite?.catch(() => undefined), new Promise((resolve) => setTimeout(resolve, graceMs).unref())]);
      if (!client.isOpen) return;
      if (client.destroy) client.destroy();
      else await client.disconnect?.().catch(() => undefined);
    },
  };
}

function settled(client: OwnedNodeRedis, ms: number): Promise<void> {
  if (client.isReady) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      client.off('ready', done);
      client.off('error', done);
      client.off('end', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    timer.unref();
    client.on('ready', done);
    client.on('error', done);
    client.on('end', done);
  });
}
