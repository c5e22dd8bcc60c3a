import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { WAKE_CHANNEL_PREFIX } from '../../../lib/core/lock/redlock-options.js';

/** How often the forger looks at the queues: often enough to catch most waiters while they wait. */
const EVERY_MS = 25;
const QUEUE_PREFIX = 'redlock-queue:';
const LOCK_PREFIX = 'redlock:';
/** A grant's tag in a queue entry (see QUEUE_LUA's grantTag): " =token ttl stamp anchor". */
const GRANT_TAG = / =\S+ \d+ \d+ (\d+)$/;

/**
 * A client that may read keys, run INFO and PUBLISH, and uses that to lie: on every master, for
 * every live queue entry, it publishes the message a release's hand-off would send that waiter
 * (a grant of its request, with an absurd `elapsed` and the master's true run_id), or for a
 * waiter that takes its own rounds a wake-up naming it. None of it may ever make a holder.
 */
export class WakeForger {
  /** Grants forged for live hand-off entries, and wake-ups forged for the others. */
  grants = 0;
  wakes = 0;
  readonly #clients: Redis[];
  readonly #stop = new AbortController();
  readonly #loops: Promise<void>[];
  /**
   * Per master, the entries (waiter id and value) already lied about: each state of an entry gets
   * its forgery once. Re-sending the same one every pass tells the waiter nothing new, and its
   * load (a round per forged wake-up) starved the timing-asserting scenarios under double load.
   */
  readonly #forged: Set<string>[];

  constructor(urls: readonly string[]) {
    // Its own connections; a paused or killed master stalls or fails only its own loop.
    this.#clients = urls.map((url) => {
      const client = new Redis(url, { maxRetriesPerRequest: 1, commandTimeout: 500, retryStrategy: () => 50 });
      client.on('error', () => {});
      return client;
    });
    this.#forged = this.#clients.map(() => new Set());
    this.#loops = this.#clients.map((client, index) => this.#forgeOn(client, this.#forged[index]!));
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    await Promise.all(this.#loops);
    for (const client of this.#clients) client.disconnect();
  }

  async #forgeOn(client: Redis, forged: Set<string>): Promise<void> {
    const signal = this.#stop.signal;
    while (!signal.aborted) {
      try {
        await this.#forgeOnce(client, forged);
      } catch {
        // The master is down, paused or restarting: the forger tries again, like any client.
      }
      await sleep(EVERY_MS, undefined, { signal }).catch(() => {});
    }
  }

  async #forgeOnce(client: Redis, forged: Set<string>): Promise<void> {
    const runId = /run_id:(\w+)/.exec(await client.info('server'))?.[1] ?? '0';
    const seen = new Set<string>();
    for (const queue of await client.keys(`${QUEUE_PREFIX}*`)) {
      const lockKey = LOCK_PREFIX + queue.slice(QUEUE_PREFIX.length);
      const entries = await client.hgetall(queue);
      const sent: Promise<unknown>[] = [];
      for (const [id, value] of Object.entries(entries)) {
        const entry = `${queue} ${id} ${value}`;
        seen.add(entry);
        if (forged.has(entry)) continue;
        const channel = WAKE_CHANNEL_PREFIX + id.slice(0, id.indexOf(':'));
        const anchor = GRANT_TAG.exec(value)?.[1];
        if (anchor === undefined) {
          sent.push(client.publish(channel, `${id} ${lockKey}`));
          this.wakes++;
        } else {
          // 27.5 hours of validity, as the review's forger claimed.
          sent.push(client.publish(channel, `${id}/${anchor}/99000000/${runId} ${lockKey}`));
          this.grants++;
        }
      }
      await Promise.all(sent);
    }
    // Entries gone from the queues are forgotten: the set stays as small as the queues.
    for (const entry of forged) if (!seen.has(entry)) forged.delete(entry);
    for (const entry of seen) forged.add(entry);
  }
}
