import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LockHeldError } from '../../lib/core/base/errors.js';
import { WAKE_CHANNEL_PREFIX } from '../../lib/core/lock/redlock-options.js';
import { RedisNode } from '../../lib/core/voters/redis-node.js';
import { ReleaseWakeups } from '../../lib/core/waiting/release-wakeups.js';
import { PROCESS_ID } from '../../lib/core/base/token.js';
import { Waiter } from '../../lib/core/waiting/waiter.js';
import { connectMasters, disconnectAll } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { masterClientOf } from '../../lib/core/voters/clients/clients.js';

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
  const wakeups = new ReleaseWakeups([new RedisNode(masterClientOf(client!))]);
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

it("a runner-up told to look again within the stay ends its sleep then, not at its fallback, even when told while its round was out", async () => {
  const [client, publisher] = await connectMasters([fleet.urls()[0]!, fleet.urls()[0]!]);
  opened.push(client!, publisher!);
  const wakeups = new ReleaseWakeups([new RedisNode(masterClientOf(client!))]);
  const channel = WAKE_CHANNEL_PREFIX + PROCESS_ID;
  const waiter = new Waiter(true, wakeups, ['hint-key'], { retryCount: Infinity, waitTimeoutMs: 600_000, retryDelayMs: 50, retryJitterMs: 0 }, undefined);
  // Told to wait far longer than the test may run: only the hint can end these pauses in time.
  const held = new LockHeldError(['hint'], ['master'], 1, 300_000);
  // Messages on the subscriber's connection arrive in order: once a marker naming this listener
  // is heard, every message published before it has been delivered.
  const markers: string[] = [];
  const marking = wakeups.register(['hint-key'], (next) => markers.push(next));
  // Published again until heard: the first may come before the subscription is confirmed.
  const delivered = async (marker: string) => {
    await expect
      .poll(async () => {
        await publisher!.publish(channel, `${marker} hint-key`);
        return markers;
      }, { timeout: 10_000 })
      .toContain(marker);
  };
  try {
    await waiter.pause(held, 600_000); // the first pause subscribes, and returns at once
    // It waits for the subscription at most SUBSCRIBE_WAIT_MS: on a loaded host it may not be
    // in place yet, and a hint published now would reach nobody. A marker heard says it is.
    await delivered(`${PROCESS_ID}:marker-0`);
    waiter.beforeRound(2);
    // A round is out: the hint comes before the waiter sleeps, and shortens the sleep after it.
    await publisher!.publish(channel, `${waiter.id}+20 hint-key`);
    await delivered(`${PROCESS_ID}:marker-1`);
    await waiter.pause(held, 600_000);
    waiter.beforeRound(3);
    // Asleep: the hint brings its timer forward. Malformed hints and others' are not acted on.
    const pausing = waiter.pause(held, 600_000);
    await publisher!.publish(channel, `${waiter.id}+soon hint-key`);
    await publisher!.publish(channel, `${PROCESS_ID}:other+0 hint-key`);
    await publisher!.publish(channel, `${waiter.id}+20 hint-key`);
    await pausing;
  } finally {
    marking.stop();
    waiter.close();
    wakeups.close();
  }
});
