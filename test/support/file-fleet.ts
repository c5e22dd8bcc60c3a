import type { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { disconnectAll } from './masters.js';
import { RedisFleet } from './redis-fleet.js';

/**
 * `count` masters for one test file, started before its tests and stopped after them (even when
 * a test fails), and the list where its tests put the clients they open, closed first.
 */
export function fileFleet(count: number): { fleet: () => RedisFleet; opened: Redis[] } {
  let fleet: RedisFleet | undefined;
  const opened: Redis[] = [];
  beforeAll(async () => {
    fleet = await RedisFleet.start(count);
  });
  afterAll(async () => {
    disconnectAll(opened);
    await fleet?.stopAll();
  });
  return { fleet: () => fleet!, opened };
}
