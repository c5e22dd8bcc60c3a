import { monotonicNow } from '../../core/base/clock.js';
import type { AttemptCall, Attempted, HeldBy } from '../../core/kinds/hold-kind.js';
import type { LockKind } from '../../core/lock/lock-kind.js';
import type { Lock, ReleaseResult } from '../../core/lock/lock.js';
import type { RoundResult } from '../../core/rounds/quorum-round.js';
import type { Waiter } from '../../core/waiting/waiter.js';
import { sharedLine, sharedWidth } from '../../core/kinds/shared/shared-holds.js';
import type { SharedHolder } from '../memory-lock-store.js';
import { attemptOn, extendOn, handAwayOn, longer, MemoryKind, releaseOn, type MemoryHoldKind, type MemoryKindParts, type Take } from './memory-kind.js';

/**
 * Holds that share a resource (kinds/shared: readers and permits) on the stand-in master: the
 * key holds the kind's marker while any holder lives, and the holders, each with its deadline and
 * (for a permit) its slots, stand beside it. Readers and permits differ only by `limit`, as in
 * the shared scripts: 0 for readers, who are not counted.
 */
export class MemorySharedKind extends MemoryKind implements MemoryHoldKind {
  /** How many callers of this process may talk to the master at once (as the real kind's). */
  readonly width: number;

  constructor(
    private readonly parts: MemoryKindParts,
    readonly kind: LockKind,
    /** How many permits a resource has; 0: any number of holders (readers). */
    private readonly limit: number,
  ) {
    super();
    this.width = sharedWidth(kind);
  }

  /** As the real kinds: holders of one kind (and weight) line up apart from writers, and only callers that wait. */
  localLine(line: string): string {
    return sharedLine(this.kind, line);
  }

  linesUp(waits: boolean): boolean {
    return waits;
  }

  /** Where a grant to another of its line wakes it (wakeHeads). */
  override sleep(localLine: string, waiter: Waiter, pause: () => Promise<void>): Promise<void> {
    return this.parts.localQueue.asleep(localLine, waiter, pause);
  }

  async attempt(call: AttemptCall): Promise<Attempted> {
    call.waiter.beforeRound();
    return attemptOn(this.parts, this.kind, call, (token) => this.#take(call, token), (token) => this.#free(call.keys, token));
  }

  /**
   * As SHARED_ACQUIRE_SCRIPT: every key free or holding this kind's marker, `permits` free slots
   * for a permit, and no waiter queued ahead, or nothing is taken and the caller enlists. Another
   * kind's marker, or a writer's token where a permit is asked for, is a mismatch.
   */
  #take({ keys, ttlMs, waiter }: AttemptCall, token: string): Take {
    const { store } = this.parts;
    const { marker, permits } = this.kind;
    const now = monotonicNow();
    let blocked = false;
    let waitMs: number | undefined;
    let room = Number.POSITIVE_INFINITY;
    const slots: number[][] = [];
    for (const [resourceIndex, key] of keys.entries()) {
      const owner = store.get(key);
      if (owner !== undefined && owner !== marker) {
        if (owner.startsWith('*')) return { granted: false, mismatch: { resourceIndex, found: owner } };
        if (this.limit > 0) return { granted: false, mismatch: { resourceIndex, found: 'lock' } };
        blocked = true;
        waitMs = longer(waitMs, store.ttl(key));
      }
      if (this.limit === 0) continue;
      const holders = [...store.holders(key).values()];
      const used = new Set(holders.flatMap((holder) => holder.slots));
      const free = Array.from({ length: this.limit }, (_, slot) => slot).filter((slot) => !used.has(slot));
      if (free.length < permits) {
        blocked = true;
        waitMs = longer(waitMs, Math.ceil(Math.min(...holders.map((holder) => holder.expiresAt)) - now));
      } else {
        slots.push(free.slice(0, permits));
        room = Math.min(room, Math.floor(free.length / permits) - 1);
      }
    }
    if (blocked || store.queuedAhead(keys, waiter)) {
      store.enlist(keys, waiter, waitMs);
      waiter.enlisted = true;
      return { granted: false, waitMs };
    }
    keys.forEach((key, index) => {
      store.holders(key).set(token, { expiresAt: now + ttlMs, slots: slots[index] ?? [] });
      if ((store.ttl(key) ?? 0) < ttlMs) store.set(key, marker, ttlMs);
    });
    store.leave(keys, waiter.id);
    // Room is left for the next of this kind in line: it looks again, as the script's grant wakes it.
    if (room > 0) for (const key of keys) store.wake(key);
    return { granted: true, slots: this.limit > 0 ? slots.flat() : undefined, room };
  }

  /** As SHARED_EXTEND_SCRIPT: only while our entry lives on every resource, with the slots we hold. */
  extend(lock: Lock, ttlMs: number): Promise<RoundResult> {
    const { store } = this.parts;
    return extendOn(store, () => {
      const mine: SharedHolder[] = [];
      for (const [index, key] of lock.keys.entries()) {
        const holder = store.holders(key).get(lock.token);
        if (!holder || store.get(key) !== this.kind.marker || (lock.slots && !sameSlots(holder.slots, lock.slots, index))) return false;
        mine.push(holder);
      }
      const expiresAt = monotonicNow() + ttlMs;
      for (const holder of mine) holder.expiresAt = expiresAt;
      for (const key of lock.keys) if ((store.ttl(key) ?? 0) < ttlMs) store.expire(key, ttlMs);
      return true;
    });
  }

  handAway(lock: Lock, held: HeldBy | undefined): void {
    handAwayOn(this.parts.store, lock, held);
  }

  release(lock: Lock, held: HeldBy | undefined): Promise<ReleaseResult> {
    return releaseOn(this.parts.store, lock, held, () => this.#free(lock.keys, lock.token));
  }

  forget(key: string, token: string): void {
    this.#drop(key, token);
  }

  #free(keys: readonly string[], token: string): boolean {
    let freed = false;
    for (const key of keys) if (this.#drop(key, token)) freed = true;
    return freed;
  }

  /**
   * As SHARED_RELEASE_SCRIPT: drops our entry; with holders left the marker lives as long as the
   * latest of them, and a freed permit wakes the waiters; with none left the key is freed.
   */
  #drop(key: string, token: string): boolean {
    const { store } = this.parts;
    const holders = store.holders(key);
    if (!holders.delete(token)) return false;
    if (store.get(key) !== this.kind.marker) return true;
    if (holders.size === 0) {
      store.delete(key);
    } else {
      store.expire(key, Math.max(...[...holders.values()].map((holder) => holder.expiresAt)) - monotonicNow());
      if (this.limit > 0) store.wake(key);
    }
    return true;
  }
}

/** Whether a holder's slots are those of resource `index` in a lock's slots (`permits` per resource). */
function sameSlots(held: readonly number[], slots: readonly number[], index: number): boolean {
  const width = held.length;
  return width > 0 && held.every((slot, k) => slot === slots[index * width + k]);
}
