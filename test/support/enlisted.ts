import type { Redis } from 'ioredis';
import { expect } from 'vitest';

/**
 * Resolves once every master has a live queue entry for `resource` (the default queue prefix):
 * a waiter has enlisted. Polls for up to 10 s, for a loaded machine.
 */
export async function enlisted(clients: readonly Redis[], resource: string): Promise<void> {
  const entries = () => Promise.all(clients.map((c) => c.hlen(`redlock-queue:${resource}`)));
  await expect.poll(async () => Math.min(...(await entries())), { timeout: 10_000 }).toBeGreaterThan(0);
}
