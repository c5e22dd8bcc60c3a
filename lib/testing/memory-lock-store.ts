import { monotonicNow } from '../core/base/clock.js';
import { nextFence } from '../core/base/fence.js';
import type { NodeOutcome } from '../core/base/node-outcome.js';
import { QUEUE_ENTRY_STAY_MS } from '../core/waiting/queue-scripts.js';
import type { ReleaseListener, WakeupSource } from '../core/waiting/release-wakeups.js';
import type { Waiter } from '../core/waiting/waiter.js';

/** The one stand-in master, as errors and health reports name it. */
export const IN_MEMORY_MASTER = 'in-memory';

export const UNREACHABLE = 'unreachable (InMemoryRedlock.makeQuorumUnreachable)';

/** The stand-in master's answer to a request while it cannot be reached. */
export const UNREACHABLE_OUTCOME: NodeOutcome = { node: IN_MEMORY_MASTER, status: 'error', error: UNREACHABLE };

/** One of the holders that share a key (readers, permits): until when (monotonic ms), and its slots (none for a reader). */
export interface SharedHolder {
  expiresAt: number;
  readonly slots: readonly number[];
}

interface Value {
  readonly value: string;
  /** Monotonic ms at which the key expires, as a key set with PX would; undefined: never. */
  expiresAt: number | undefined;
}

/** A waiter's place in a key's fair queue. */
interface Entry {
  readonly id: string;
  readonly ticket: number;
  /** It lapses then (monotonic ms) unless its waiter comes back, as a crashed waiter's would. */
  deadline: number;
}

/**
 * What the masters would hold, kept in one process for the memory kinds (memory-kinds/), which
 * read and write it as the kinds' scripts do a master: per lock key its value (a holder's token,
 * or the marker of the holders that share it) and expiry, those holders, its fence counter and
 * its fair queue, and who listens for its releases (the wake-ups of the engine's waiters). It
 * knows no lock kind: what a value means is the kinds' business, as on a master it is their
 * scripts'. The kinds' calls run whole, as a script runs on a master. What expires does so on
 * the monotonic clock the locks use, read lazily: an expired key is gone the next time it is read.
 */
export class MemoryLockStore implements WakeupSource {
  reachable = true;
  /** The waiters listen for releases here, so every release reaches them: they need not look again before their first sleep. */
  readonly namesReachUs = true;
  readonly #values = new Map<string, Value>();
  readonly #holders = new Map<string, Map<string, SharedHolder>>();
  readonly #fences = new Map<string, number>();
  /** Per key, the waiters that were refused and still wait. */
  readonly #queues = new Map<string, Entry[]>();
  readonly #listeners = new Map<string, Set<ReleaseListener>>();

  /** The value of `key`, while it is set. */
  get(key: string): string | undefined {
    const entry = this.#values.get(key);
    if (entry?.expiresAt !== undefined && entry.expiresAt <= monotonicNow()) {
      this.#values.delete(key);
      return undefined;
    }
    return entry?.value;
  }

  /** How many ms `key` lives on: undefined when it is not set, or set without expiry. */
  ttl(key: string): number | undefined {
    if (this.get(key) === undefined) return undefined;
    const expiresAt = this.#values.get(key)!.expiresAt;
    return expiresAt === undefined ? undefined : Math.ceil(expiresAt - monotonicNow());
  }

  /** Sets `key` whoever holds it, for `ttlMs` or (undefined) for ever. */
  set(key: string, value: string, ttlMs: number | undefined): void {
    this.#values.set(key, { value, expiresAt: ttlMs === undefined ? undefined : monotonicNow() + ttlMs });
  }

  /** `key`, if set, lives `ttlMs` from now. */
  expire(key: string, ttlMs: number): void {
    if (this.get(key) !== undefined) this.#values.get(key)!.expiresAt = monotonicNow() + ttlMs;
  }

  /** Deletes `key` if it holds `value` (whatever it holds, without one): whether it did. Its waiters look again. */
  delete(key: string, value?: string): boolean {
    const current = this.get(key);
    if (current === undefined || (value !== undefined && current !== value)) return false;
    this.#values.delete(key);
    this.wake(key);
    return true;
  }

  /** The live holders that share `key`, by token; a kind adds and drops its own. */
  holders(key: string): Map<string, SharedHolder> {
    let holders = this.#holders.get(key);
    if (!holders) this.#holders.set(key, (holders = new Map()));
    const now = monotonicNow();
    for (const [token, holder] of holders) if (holder.expiresAt <= now) holders.delete(token);
    return holders;
  }

  /** What `key` holds, as the inspect script reads a master: its value, live holders, waiters and fence. Writes nothing. */
  inspect(key: string): { value: string | undefined; ttlMs: number; holders: number; used: number; latestMs: number; waiting: number; fence: number | undefined } {
    const now = monotonicNow();
    const value = this.get(key);
    const ttl = this.ttl(key);
    const live = [...(this.#holders.get(key)?.values() ?? [])].filter((holder) => holder.expiresAt > now);
    const latestMs = Math.max(0, ...live.map((holder) => Math.round(holder.expiresAt - now)));
    const waiting = (this.#queues.get(key) ?? []).filter((entry) => entry.deadline >= now).length;
    return { value, ttlMs: value === undefined ? -2 : (ttl ?? -1), holders: live.length, used: live.reduce((sum, holder) => sum + Math.max(1, holder.slots.length), 0), latestMs, waiting, fence: this.#fences.get(key) };
  }

  /** Raises the fence counters of `keys` past the highest of them, as a fenced acquisition does: the new fence. */
  raiseFence(keys: readonly string[], timeFloor: boolean): number {
    const fence = nextFence(Math.max(0, ...keys.map((key) => this.#fences.get(key) ?? 0)), timeFloor);
    for (const key of keys) this.#fences.set(key, fence);
    return fence;
  }

  /** Whether a live waiter with a lower ticket than `waiter`'s stands in the queue of one of `keys`. */
  queuedAhead(keys: readonly string[], waiter: Waiter): boolean {
    return keys.some((key) => this.#queue(key).some((entry) => entry.ticket < waiter.ticket || (entry.ticket === waiter.ticket && entry.id < waiter.id)));
  }

  /**
   * A refused waiter takes its place in the queues of `keys` (or keeps it), as the scripts'
   * enlist: for what it was told to wait (`waitMs`) and a stay more, unless it comes back.
   * A caller that does not wait (no id) takes none.
   */
  enlist(keys: readonly string[], waiter: Waiter, waitMs: number | undefined): void {
    if (waiter.id === '') return;
    const deadline = monotonicNow() + Math.max(waitMs ?? 0, 0) + QUEUE_ENTRY_STAY_MS;
    for (const key of keys) {
      const queue = this.#queue(key);
      const entry = queue.find((queued) => queued.id === waiter.id);
      if (entry) entry.deadline = deadline;
      else queue.push({ id: waiter.id, ticket: waiter.ticket, deadline });
      this.#queues.set(key, queue);
    }
  }

  /** `id`'s entries leave the queues of `keys`: a head that leaves lets the next look again. */
  leave(keys: readonly string[], id: string): void {
    if (id === '') return;
    for (const key of keys) {
      const queue = this.#queue(key);
      const index = queue.findIndex((entry) => entry.id === id);
      if (index < 0) continue;
      const head = queue.every((entry) => entry.ticket >= queue[index]!.ticket);
      queue.splice(index, 1);
      if (queue.length === 0) this.#queues.delete(key);
      if (head) this.wake(key);
    }
  }

  /** Tells whoever waits for `key` to look again (a release named nobody in particular). */
  wake(key: string): void {
    const listeners = this.#listeners.get(key);
    if (listeners) for (const listener of [...listeners]) listener('', 0, undefined);
  }

  register(channels: readonly string[], onRelease: ReleaseListener): { stop: () => void; subscribed: () => Promise<void> } {
    for (const channel of channels) {
      let listeners = this.#listeners.get(channel);
      if (!listeners) this.#listeners.set(channel, (listeners = new Set()));
      listeners.add(onRelease);
    }
    const stop = () => {
      for (const channel of channels) {
        const listeners = this.#listeners.get(channel);
        if (listeners?.delete(onRelease) && listeners.size === 0) this.#listeners.delete(channel);
      }
    };
    return { stop, subscribed: () => Promise.resolve() };
  }

  /** The live entries of `key`'s queue (dead ones dropped). */
  #queue(key: string): Entry[] {
    const queue = this.#queues.get(key);
    if (!queue) return [];
    const now = monotonicNow();
    const live = queue.filter((entry) => entry.deadline > now);
    if (live.length === queue.length) return queue;
    if (live.length === 0) this.#queues.delete(key);
    else this.#queues.set(key, live);
    return live;
  }
}
