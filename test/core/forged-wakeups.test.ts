import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { CONFIRM_SCRIPT } from '../../lib/core/waiting/queue-scripts.js';
import { WAKE_CHANNEL_PREFIX } from '../../lib/core/lock/redlock-options.js';
import { readWake } from '../../lib/core/waiting/release-wakeups.js';
import { PROCESS_ID } from '../../lib/core/base/token.js';
import { PATIENT, watchCalls } from '../support/masters.js';
import { CLIENT_LIBRARIES, separateEngineOn, type ClientLibrary } from '../support/lock-clients.js';
import { enlisted, heldEverywhere } from '../support/enlisted.js';
import { fileFleet } from '../support/file-fleet.js';

// A wake-up is a hint: anyone who can read the masters' queues (the entry's id and anchor) and
// INFO (the run_id) can publish a message in the exact form a release's hand-off sends. Only the
// master's own answer to the waiter's request may make a grant, and the validity comes from the
// waiter's clock, never from the message.

const { fleet: masters, opened } = fileFleet(3);

/** The waiter's queue entry on a master: its id and the anchor of the request that wrote it. */
async function entryOf(client: Redis, resource: string): Promise<{ id: string; anchor: string }> {
  const entries = await client.hgetall(`redlock-queue:${resource}`);
  const [[id, value]] = Object.entries(entries) as [[string, string]];
  return { id, anchor: value.split(' ').at(-1)! };
}

describe.each(CLIENT_LIBRARIES)('a forged hand-off message, on %s', (library: ClientLibrary) => {
  it('is not a grant: the waiter keeps waiting while the holder holds, then gets the lock from the release', async () => {
    const a = await separateEngineOn(library, masters().urls(), opened, PATIENT);
    const b = await separateEngineOn(library, masters().urls(), opened, PATIENT);
    const held = await a.redlock.acquire('f', 10_000);
    await heldEverywhere(a.clients, 'redlock:f');
    let confirmations = 0;
    for (const client of b.lockClients) {
      watchCalls(client, 'evalsha', ([sha], reply) => {
        if (sha === CONFIRM_SCRIPT.sha) void reply.then(() => confirmations++, () => confirmations++);
      });
    }
    let settled = false;
    const waiting = b.redlock.acquire('f', 10_000, { waitTimeoutMs: 20_000 });
    void waiting.then(
      () => (settled = true),
      () => (settled = true),
    );
    await enlisted(a.clients, 'f');
    const channel = `${WAKE_CHANNEL_PREFIX}${PROCESS_ID}`;
    const runIds = await Promise.all(a.clients.map(async (client) => /run_id:(\w+)/.exec(await client.info('server'))![1]!));
    /** One master's message, in the exact form a release's hand-off sends, for the waiter's live entry there. */
    const forge = async (client: Redis, index: number) => {
      const { id, anchor } = await entryOf(client, 'f');
      expect(id.startsWith(`${PROCESS_ID}:`)).toBe(true);
      // A grant of any validity (27.5 h), and one of none at all.
      await client.publish(channel, `${id}/${anchor}/99000000/${runIds[index]} redlock:f`);
      await client.publish(channel, `${id}/${anchor}/NaN/${runIds[index]} redlock:f`);
    };
    // Forged on every master, again until the waiter (whose subscriber joins at its first pause,
    // and whose rounds move its entry on) has asked about three of them.
    await expect
      .poll(
        async () => {
          await Promise.all(a.clients.map(forge));
          return settled || confirmations >= 3;
        },
        { timeout: 10_000 },
      )
      .toBe(true);
    expect(settled).toBe(false);
    // Every master still holds the holder's token.
    expect(await Promise.all(a.clients.map((client) => client.get('redlock:f')))).toEqual(a.clients.map(() => held.token));
    await held.release();
    const lock = await waiting;
    expect(lock.remainingMs()).toBeGreaterThan(0);
    expect(lock.remainingMs()).toBeLessThanOrEqual(10_000);
    await expect.poll(() => Promise.all(b.clients.map((client) => client.get('redlock:f')))).toEqual(b.clients.map(() => lock.token));
    await lock.release();
  });
});

describe('reading a wake-up', () => {
  const channel = `${WAKE_CHANNEL_PREFIX}${PROCESS_ID}`;

  it('takes from a grant only the waiter and the request it names', () => {
    expect(readWake(channel, 'p:1/7/99000000/abc redlock:k')).toEqual({ key: 'redlock:k', next: 'p:1', grantAnchor: 7 });
    expect(readWake(channel, 'p:1 redlock:k with spaces')).toEqual({ key: 'redlock:k with spaces', next: 'p:1', grantAnchor: undefined });
    expect(readWake('redlock:k', '')).toEqual({ key: 'redlock:k', next: '', grantAnchor: undefined });
    expect(readWake(channel, 'p:1+1000 redlock:k')).toEqual({ key: 'redlock:k', next: 'p:1', grantAnchor: undefined, recheckMs: 1000 });
  });

  it.each(['', 'no-space', ' redlock:k', 'p:1/ redlock:k', 'p:1/x/0/abc redlock:k', 'p:1/-1/0/abc redlock:k', 'p:1/1e400 redlock:k', 'p:1+ redlock:k', 'p:1+x redlock:k', '+5 redlock:k', 'p:1+-1 redlock:k'])(
    'drops %j',
    (message) => {
      expect(readWake(channel, message)).toBeUndefined();
    },
  );
});
