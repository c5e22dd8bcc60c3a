import { once } from 'node:events';
import type { Redis } from 'ioredis';
import { createClient } from 'redis';
import type { RedlockClient } from '../../lib/core/voters/clients/clients.js';
import { lockClient, untilReady } from './masters.js';

/**
 * The client libraries the engine is proven on: tests that touch the wire run once per library,
 * the engine's own clients made by it (the test's probes of the masters stay ioredis: they are
 * the harness, not the client under test).
 */
export const CLIENT_LIBRARIES = ['ioredis', 'node-redis'] as const;
export type ClientLibrary = (typeof CLIENT_LIBRARIES)[number];

type NodeRedis = ReturnType<typeof createClient>;

/**
 * A node-redis client as a lock user should configure it, as LOCK_CLIENT_OPTIONS does for
 * ioredis: no offline queue (a dead master fails the request at once), quick reconnection.
 */
export function nodeRedisLockClient(url: string): NodeRedis {
  const client = createClient({ url, disableOfflineQueue: true, socket: { reconnectStrategy: (retries: number) => Math.min(retries * 20, 200) } });
  // Reconnection errors while a test has a master down are expected; failed commands still reject.
  client.on('error', () => {});
  return client;
}

/** One lock client of `library` per URL, once all are ready. */
export async function connectLockClients(library: ClientLibrary, urls: readonly string[]): Promise<RedlockClient[]> {
  if (library === 'ioredis') {
    const clients = urls.map((url) => lockClient(url));
    await Promise.all(clients.map(untilReady));
    return clients;
  }
  const clients = urls.map(nodeRedisLockClient);
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

/** Closes lock clients of either library at once (no QUIT: a master may be down). */
export function closeLockClients(clients: Iterable<RedlockClient>): void {
  for (const client of clients) {
    if (isNodeRedis(client)) {
      if (client.isOpen) (client as unknown as NodeRedis).destroy();
    } else (client as Redis).disconnect();
  }
}

function isNodeRedis(client: RedlockClient): client is RedlockClient & { isOpen: boolean; isReady: boolean } {
  return typeof (client as { sendCommand?: unknown }).sendCommand === 'function' && typeof (client as { isOpen?: unknown }).isOpen === 'boolean';
}
