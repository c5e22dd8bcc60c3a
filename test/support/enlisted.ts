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

/**
 * Resolves once every master holds `key` (with `permits`, once its holders' hash has that many
 * entries). An acquire returns at a quorum: a master it has not reached yet would grant a second
 * engine's round instead of queueing it, and that waiter would never enlist there.
 */
export async function heldEverywhere(clients: readonly Redis[], key: string, permits?: number): Promise<void> {
  const held = (c: Redis) => (permits === undefined ? c.exists(key) : c.hlen(key));
  await expect.poll(() => Promise.all(clients.map(held)), { timeout: 10_000 }).toEqual(clients.map(() => permits ?? 1));
}
