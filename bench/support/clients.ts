import type { Redis } from 'ioredis';
import { connectMasters, disconnectAll, LOCK_CLIENT_OPTIONS } from '../../test/support/masters.js';

/**
 * Every library gets ioredis 6 clients built exactly like this: the options the project
 * recommends for lock clients (no offline queue, one retry per request), plus auto-pipelining
 * when the scenario asks for it. One client per master, per library instance.
 */
export function connect(urls: readonly string[], autoPipelining: boolean): Promise<Redis[]> {
  return connectMasters(urls, { enableAutoPipelining: autoPipelining });
}

export function disconnect(clients: readonly Redis[]): void {
  disconnectAll(clients);
}

export function describeClientOptions(): string {
  const { retryStrategy, ...plain } = LOCK_CLIENT_OPTIONS;
  const shown = { ...plain, retryStrategy: retryStrategy ? 'min(times*20, 200) ms' : undefined };
  return `${JSON.stringify(shown)}, enableAutoPipelining per scenario`;
}
