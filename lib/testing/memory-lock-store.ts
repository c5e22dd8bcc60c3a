import { monotonicNow } from '../core/base/clock.js';
import { nextFence } from '../core/base/fence.js';
import { describeKind, type LockKind } from '../core/lock/lock-kind.js';

/** One caller of acquire: its place in the fair queue, chosen once when the call starts. */
export interface QueueTicket {
  readonly ticket: number;
}

export type TakeOutcome =
  | { readonly granted: true; readonly slots?: readonly number[] }
  /** The resource is held as another kind (another limit, or a semaphore beside locks). */
  | { readonly granted: false; readonly mismatch: { readonly resource: string; readonly found: string } }
  /** `retryAfterMs`: the longest remaining ttl of the keys in the way (none for keys without expiry). */
  | { readonly granted: false; readonly retryAfterMs: number | undefined };

/** Readers or permit holders of one resource: their kind, and per token its expiry and slot. */
interface SharedEntry {
  readonly kind: LockKind;
  readonly holders: Map<string, { expiresAt: number; readonly slot: number }>;
}

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
  readonly #shared = new Map<string, SharedEntry>();
  readonly #fences = new Map<string, number>();
  /** Per resource, the waiters that were refused and still wait, lowest ticket first. */
  readonly #queues = new Map<string, QueueTicket[]>();
  readonly #sleepers = new Map<string, Set<() => void>>();
  reachable = true;

  /** The token holding `resource` now, if any (for readers and permits, one of them). */
  holder(resource: string): string | undefined {
    return this.#live(resource)?.token ?? this.#liveShared(resource)?.holders.keys().next().value;
  }

  /** Whether `token` holds `resource` now, alone or as a reader or permit. */
  holds(resource: string, token: string): boolean {
    return this.#live(resource)?.token === token || this.#liveShared(resource)?.holders.has(token) === true;
  }

  /** Monotonic ms at which `resource`'s key expires, if it is held and has a ttl. */
  expiresAt(resource: string): number | undefined {
    return this.#live(resource)?.expiresAt;
  }

  /**
   * All or nothing, as the acquire script: every key free (or ours) and no waiter queued ahead of
   * `caller`, or nothing is taken. A refused caller that will wait joins each resource's queue.
   * A `plain` take is a SET NX: a semaphore's marker is only a held key to it, not another kind.
   */
  take(resources: readonly string[], token: string, ttlMs: number, caller: QueueTicket, enlist: boolean, plain = false): TakeOutcome {
    let blocked = false;
    let retryAfterMs: number | undefined;
    const now = monotonicNow();
    for (const resource of resources) {
      const shared = this.#liveShared(resource);
      if (shared?.kind.type === 'permit' && !plain) return { granted: false, mismatch: { resource, found: describeKind(shared.kind) } };
      if (shared) {
        blocked = true;
        retryAfterMs = Math.max(retryAfterMs ?? 0, Math.ceil(latest(shared) - now));
      }
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

  /**
   * A reader or a permit, all or nothing, as the shared acquire script: no writer, no other kind,
   * a free slot for a permit, and no waiter queued ahead of `caller`.
   */
  takeShared(resources: readonly string[], token: string, ttlMs: number, caller: QueueTicket, enlist: boolean, kind: LockKind): TakeOutcome {
    let blocked = false;
    let retryAfterMs: number | undefined;
    const now = monotonicNow();
    const slots: number[] = [];
    for (const resource of resources) {
      const shared = this.#liveShared(resource);
      if (shared && describeKind(shared.kind) !== describeKind(kind)) return { granted: false, mismatch: { resource, found: describeKind(shared.kind) } };
      const entry = this.#live(resource);
      if (entry && kind.type === 'permit') return { granted: false, mismatch: { resource, found: 'lock' } };
      if (entry) {
        blocked = true;
        if (entry.expiresAt !== undefined) retryAfterMs = Math.max(retryAfterMs ?? 0, Math.ceil(entry.expiresAt - now));
      }
      if (kind.type === 'permit') {
        const used = new Set([...(shared?.holders.values() ?? [])].map((holder) => holder.slot));
        const free = Array.from({ length: kind.limit }, (_, slot) => slot).find((slot) => !used.has(slot));
        if (free === undefined) {
          blocked = true;
          retryAfterMs = Math.max(retryAfterMs ?? 0, Math.ceil(Math.min(...[...shared!.holders.values()].map((h) => h.expiresAt)) - now));
        }
        slots.push(free ?? -1);
      }
      if (this.#queues.get(resource)?.some((waiter) => waiter.ticket < caller.ticket)) blocked = true;
    }
    if (blocked) {
      if (enlist) for (const resource of resources) this.#enlist(resource, caller);
      return { granted: false, retryAfterMs };
    }
    resources.forEach((resource, i) => {
      const shared = this.#liveShared(resource) ?? { kind, holders: new Map() };
      shared.holders.set(token, { expiresAt: now + ttlMs, slot: slots[i] ?? -1 });
      this.#shared.set(resource, shared);
    });
    this.leaveQueues(resources, caller);
    // Room is left for the next reader or permit in line: wake it, as the script's grant does.
    for (const resource of resources) this.#wake(resource);
    return { granted: true, ...(kind.type === 'permit' ? { slots } : {}) };
  }

  /** Extends a reader or permit: true when `token` still holds every resource. */
  extendShared(resources: readonly string[], token: string, ttlMs: number): boolean {
    if (!resources.every((resource) => this.#liveShared(resource)?.holders.has(token))) return false;
    for (const resource of resources) this.#shared.get(resource)!.holders.get(token)!.expiresAt = monotonicNow() + ttlMs;
    return true;
  }

  /** Drops a reader or permit: how many resources it still held. Wakes their waiters. */
  freeShared(resources: readonly string[], token: string): number {
    let freed = 0;
    for (const resource of resources) {
      if (!this.#liveShared(resource)?.holders.delete(token)) continue;
      freed++;
      this.#wake(resource);
    }
    return freed;
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
      const shared = this.#shared.delete(resource);
      if (this.#keys.delete(resource) || shared) this.#wake(resource);
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

  /** The resource's live readers or permits, none when they all expired. */
  #liveShared(resource: string): SharedEntry | undefined {
    const shared = this.#shared.get(resource);
    if (!shared) return undefined;
    const now = monotonicNow();
    for (const [token, holder] of shared.holders) if (holder.expiresAt <= now) shared.holders.delete(token);
    if (shared.holders.size > 0) return shared;
    this.#shared.delete(resource);
    return undefined;
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

function latest(shared: SharedEntry): number {
  return Math.max(...[...shared.holders.values()].map((holder) => holder.expiresAt));
}
