import { monotonicNow } from '../core/clock.js';
import { nextFence } from '../core/fence.js';

/** One caller of acquire: its place in the fair queue, chosen once when the call starts. */
export interface QueueTicket {
  readonly ticket: number;
}

export type TakeOutcome =
  | { readonly granted: true }
  /** `retryAfterMs`: the longest remaining ttl of the keys in the way (none for keys without expiry). */
  | { readonly granted: false; readonly retryAfterMs: number | undefined };

interface Entry {
  readonly token: string;
  /** Monotonic ms at which the key expires, as a key set with PX would; undefined: never. */
  expiresAt: number | undefined;
}

/**
 * What the masters would hold, kept in one process: per resource the key (token and expiry), the
 * fence counter and the fair queue of waiters, and whether the masters can be reached at all.
 * Every operation is atomic, as a script on a master is. Keys expire on the monotonic clock the
 * locks themselves use, read lazily: an expired key is simply gone the next time it is looked at.
 */
export class MemoryLockStore {
  readonly #keys = new Map<string, Entry>();
  readonly #fences = new Map<string, number>();
  /** Per resource, the waiters that were refused and still wait, lowest ticket first. */
  readonly #queues = new Map<string, QueueTicket[]>();
  readonly #sleepers = new Map<string, Set<() => void>>();
  reachable = true;

  /** The token holding `resource` now, if any. */
  holder(resource: string): string | undefined {
    return this.#live(resource)?.token;
  }

  /** Monotonic ms at which `resource`'s key expires, if it is held and has a ttl. */
  expiresAt(resource: string): number | undefined {
    return this.#live(resource)?.expiresAt;
  }

  /**
   * All or nothing, as the acquire script: every key free (or ours) and no waiter queued ahead of
   * `caller`, or nothing is taken. A refused caller that will wait joins each resource's queue.
   */
  take(resources: readonly string[], token: string, ttlMs: number, caller: QueueTicket, enlist: boolean): TakeOutcome {
    let blocked = false;
    let retryAfterMs: number | undefined;
    const now = monotonicNow();
    for (const resource of resources) {
      const entry = this.#live(resource);
      if (entry && entry.token !== token) {
        blocked = true;
        if (entry.expiresAt !== undefined) retryAfterMs = Math.max(retryAfterMs ?? 0, Math.ceil(entry.expiresAt - now));
      }
      if (this.#queues.get(resource)?.some((waiter) => waiter.ticket < caller.ticket)) blocked = true;
    }
    if (blocked) {
      if (enlist) for (const resource of resources) this.#enlist(resource, caller);
      return { granted: false, retryAfterMs };
    }
    this.set(resources, token, ttlMs);
    this.leaveQueues(resources, caller);
    return { granted: true };
  }

  /** Sets the keys whoever holds them, with a ttl or none: another owner taking them. */
  set(resources: readonly string[], token: string, ttlMs: number | undefined): void {
    const expiresAt = ttlMs === undefined ? undefined : monotonicNow() + ttlMs;
    for (const resource of resources) this.#keys.set(resource, { token, expiresAt });
  }

  /** Raises each resource's fence counter past the highest of them, as a fenced acquisition does. */
  fence(resources: readonly string[], timeFloor: boolean): number {
    const highest = Math.max(0, ...resources.map((resource) => this.#fences.get(resource) ?? 0));
    const fence = nextFence(highest, timeFloor);
    for (const resource of resources) this.#fences.set(resource, fence);
    return fence;
  }

  /** Compare-and-expire: true when every key still holds `token`, and only then are they extended. */
  extend(resources: readonly string[], token: string, ttlMs: number): boolean {
    if (!resources.every((resource) => this.holder(resource) === token)) return false;
    const expiresAt = monotonicNow() + ttlMs;
    for (const resource of resources) this.#keys.get(resource)!.expiresAt = expiresAt;
    return true;
  }

  /** Compare-and-delete per key: how many keys held `token` and are free now. Wakes their waiters. */
  free(resources: readonly string[], token: string): number {
    let freed = 0;
    for (const resource of resources) {
      if (this.holder(resource) !== token) continue;
      this.#keys.delete(resource);
      freed++;
      this.#wake(resource);
    }
    return freed;
  }

  /** Deletes the keys whoever holds them, as an operator (or an expiry) would. Wakes their waiters. */
  drop(resources: readonly string[]): void {
    for (const resource of resources) {
      if (this.#keys.delete(resource)) this.#wake(resource);
    }
  }

  /** A waiter that holds the lock or gives up leaves the queues: those behind it may go first now. */
  leaveQueues(resources: readonly string[], caller: QueueTicket): void {
    for (const resource of resources) {
      const queue = this.#queues.get(resource);
      const index = queue?.indexOf(caller) ?? -1;
      if (index < 0) continue;
      queue!.splice(index, 1);
      if (queue!.length === 0) this.#queues.delete(resource);
      if (index === 0) this.#wake(resource);
    }
  }

  /**
   * Sleeps until one of `resources` is freed (or its queue's head leaves), `ms` pass, or `signal`
   * aborts (then rejects with its reason).
   */
  sleep(resources: readonly string[], ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const finish = (error?: unknown) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        for (const resource of resources) {
          const sleepers = this.#sleepers.get(resource);
          sleepers?.delete(wake);
          if (sleepers?.size === 0) this.#sleepers.delete(resource);
        }
        if (error === undefined) resolve();
        else reject(error);
      };
      const wake = () => finish();
      const onAbort = () => finish(signal!.reason ?? new Error('aborted'));
      const timer = setTimeout(wake, Math.max(0, ms));
      for (const resource of resources) {
        let sleepers = this.#sleepers.get(resource);
        if (!sleepers) this.#sleepers.set(resource, (sleepers = new Set()));
        sleepers.add(wake);
      }
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  #live(resource: string): Entry | undefined {
    const entry = this.#keys.get(resource);
    if (entry?.expiresAt !== undefined && entry.expiresAt <= monotonicNow()) {
      this.#keys.delete(resource);
      return undefined;
    }
    return entry;
  }

  #enlist(resource: string, caller: QueueTicket): void {
    const queue = this.#queues.get(resource) ?? [];
    if (queue.includes(caller)) return;
    const at = queue.findIndex((waiter) => waiter.ticket > caller.ticket);
    queue.splice(at < 0 ? queue.length : at, 0, caller);
    this.#queues.set(resource, queue);
  }

  #wake(resource: string): void {
    const sleepers = this.#sleepers.get(resource);
    if (!sleepers) return;
    for (const wake of [...sleepers]) wake();
  }
}
