import type { Redis } from 'ioredis';
import type { RedlockClient } from '../../lib/core/voters/clients/clients.js';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { connectMasters, disconnectAll } from './masters.js';
import { RedisFleet } from './redis-fleet.js';

/**
 * `count` masters for one test file, started before its tests and stopped after them (even when
 * a test fails), and the list where its tests put the clients they open, closed first. With
 * `emptyAfterEach`, each test's clients are closed and the masters emptied after it.
 */
export function fileFleet(count: number, { emptyAfterEach = false } = {}): { fleet: () => RedisFleet; opened: (Redis | RedlockClient)[] } {
  let fleet: RedisFleet | undefined;
  const opened: (Redis | RedlockClient)[] = [];
  beforeAll(async () => {
    fleet = await RedisFleet.start(count);
  });
  if (emptyAfterEach) {
    afterEach(async () => {
      disconnectAll(opened.splice(0));
      const cleaners = await connectMasters(fleet!.urls());
      await Promise.all(cleaners.map((client) => client.flushall()));
      disconnectAll(cleaners);
    });
  }
  afterAll(async () => {
    disconnectAll(opened);
    await fleet?.stopAll();
  });
  return { fleet: () => fleet!, opened };
}
