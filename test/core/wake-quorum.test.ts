import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, expect, it, vi } from 'vitest';
import { LockHeldError } from '../../lib/core/base/errors.js';
import { WAKE_CHANNEL_PREFIX } from '../../lib/core/lock/redlock-options.js';
import { RedisNode } from '../../lib/core/voters/redis-node.js';
import { ReleaseWakeups } from '../../lib/core/waiting/release-wakeups.js';
import { PROCESS_ID } from '../../lib/core/base/token.js';
import { Waiter } from '../../lib/core/waiting/waiter.js';
import { connectMasters, disconnectAll } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { masterClientOf } from '../../lib/core/voters/clients/clients.js';

// A release lands on the masters one by one, and each names the queue's head on its process's
// channel. A waiter named by the first master alone would find the lock still held on the
// others: it tries once as many masters as its round needs have named it (or one round's time
// after the first did, which this test makes a minute long).

let fleet: RedisFleet;
const opened: Redis[] = [];
const KEY = 'redlock:wake-quorum';
const WAIT = { retryCount: 100, retryDelayMs: 60_000, retryJitterMs: 0, waitTimeoutMs: 600_000 };

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterEach(() => {
  vi.restoreAllMocks();
});

afterAll(async () => {
  disconnectAll(opened);
  await fleet?.stopAll();
});

it('a waiter named by one master of the three that queued it waits for a second (quorum 2), then tries', async () => {
  const clients = await connectMasters(fleet.urls());
  const publishers = await connectMasters(fleet.urls());
  opened.push(...clients, ...publishers);
  const wakeups = new ReleaseWakeups(clients.map((client) => new RedisNode(masterClientOf(client))));
  try {
    // Another listener on the key: once it has heard a message, so has the waiter (same dispatch).
    let heard = 0;
    const probe = wakeups.register([KEY], () => heard++);
    await probe.subscribed();
    // subscribed() stops waiting for a master's confirmation after 100 ms (a loaded box can be
    // slower): this test needs every master's, which a real waiter does not.
    await expect.poll(() => wakeups.namesReachUs).toBe(true);

    const waiter = new Waiter(true, wakeups, [KEY], WAIT, undefined, 2);
    // Its round took a minute (by the clock it reads): the longest it would wait after a first message.
    const clock = vi.spyOn(performance, 'now').mockReturnValue(0);
    waiter.beforeRound();
    clock.mockReturnValue(60_000);
    const refused = new LockHeldError([KEY], ['m0', 'm1', 'm2'], 1, 60_000);
    let woken = false;
    // Listening since before its round, on masters that all deliver to this process (the probe
    // joined its channel): the first pause sleeps at once, with no second round to cover a
    // release it might have missed.
    const sleeping = waiter.pause(refused, 600_000).then(() => (woken = true));
    clock.mockRestore();
    const name = async (master: number) => {
      const before = heard;
      expect(await publishers[master]!.publish(`${WAKE_CHANNEL_PREFIX}${PROCESS_ID}`, `${waiter.id} ${KEY}`)).toBe(1);
      await expect.poll(() => heard).toBe(before + 1);
    };
    await name(0);
    await name(0); // the same master again counts once
    expect(woken).toBe(false);
    await name(1);
    await sleeping;
    expect(woken).toBe(true);
    probe.stop();
    waiter.close();
  } finally {
    wakeups.close();
  }
});
