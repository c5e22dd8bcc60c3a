import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { RedisNode } from '../../lib/core/redis-node.js';
import { ReleaseWakeups } from '../../lib/core/release-wakeups.js';
import { connectMasters, disconnectAll } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';

let fleet: RedisFleet;
const opened: Redis[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(1);
});

afterAll(async () => {
  disconnectAll(opened);
  await fleet?.stopAll();
});

it('a second listener on a channel being subscribed returns only once the subscription is in place', async () => {
  // Readers and permits of one process wait side by side on one key: the second one's listen
  // must not return while the first one's SUBSCRIBE is still on its way, or a release published
  // in between reaches neither and both sleep until their fallback timers.
  const [client, publisher] = await connectMasters([fleet.urls()[0]!, fleet.urls()[0]!]);
  opened.push(client!, publisher!);
  const wakeups = new ReleaseWakeups([new RedisNode(client!)]);
  try {
    const heard: string[] = [];
    const first = wakeups.listen(['wake-key'], (next) => heard.push(`first ${next}`));
    await wakeups.listen(['wake-key'], (next) => heard.push(`second ${next}`));
    // PUBLISH answers how many subscribers it reached: the subscription must already be there.
    expect(await publisher!.publish('wake-key', '')).toBe(1);
    await first;
    await expect.poll(() => heard.sort()).toEqual(['first ', 'second ']);
  } finally {
    wakeups.close();
  }
});
