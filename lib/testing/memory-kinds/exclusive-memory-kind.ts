import type { AttemptCall, Attempted, HeldBy } from '../../core/kinds/hold-kind.js';
import { WRITE } from '../../core/lock/lock-kind.js';
import type { Lock, ReleaseResult } from '../../core/lock/lock.js';
import type { RoundResult } from '../../core/rounds/quorum-round.js';
import { attemptOn, extendOn, handAwayOn, longer, MemoryKind, releaseOn, type MemoryHoldKind, type MemoryKindParts, type Take } from './memory-kind.js';

/** How a semaphore's marker begins (`*s<limit>`): a resource of another family, never waited for. */
const PERMITS_MARKER = '*s';

/**
 * The exclusive lock (kinds/exclusive) on the stand-in master: the key holds the holder's token.
 * Its callers of one process line up one at a time, as the real kind's; a release frees the key
 * and wakes the next rather than handing the lock over.
 */
export class MemoryExclusiveKind extends MemoryKind implements MemoryHoldKind {
  readonly kind = WRITE;
  readonly width = 1;

  constructor(private readonly parts: MemoryKindParts) {
    super();
  }

  localLine(line: string): string {
    return line;
  }

  /** As the real kind: even a caller that will not wait lines up (the line says whether a plain SET NX may do). */
  linesUp(): boolean {
    return true;
  }

  async attempt(call: AttemptCall): Promise<Attempted> {
    // As the real kind's first try: a plain SET NX on a single unfenced key nobody of this process waits for.
    const plain = call.uncontended && call.attempt === 1 && call.keys.length === 1 && !call.fencing;
    if (!plain) call.waiter.beforeRound(call.attempt);
    return attemptOn(this.parts, WRITE, call, (token) => this.#take(call, token, plain), (token) => this.#free(call.keys, token));
  }

  /**
   * As ACQUIRE_SCRIPT (TAKE_SCRIPT for `plain`): every key free or ours, and no waiter queued ahead,
   * or nothing is taken and the caller enlists. A plain SET NX sees a semaphore's marker only as
   * a held key, and takes no place in the queue; nor can it slip in ahead of one, for a master
   * keeps a released key reserved for the queue's head.
   */
  #take({ keys, ttlMs, waiter }: AttemptCall, token: string, plain: boolean): Take {
    const { store } = this.parts;
    let blocked = false;
    let waitMs: number | undefined;
    for (const [resourceIndex, key] of keys.entries()) {
      const owner = store.get(key);
      if (owner === undefined || owner === token) continue;
      if (!plain && owner.startsWith(PERMITS_MARKER)) return { granted: false, mismatch: { resourceIndex, found: owner } };
      blocked = true;
      waitMs = longer(waitMs, store.ttl(key));
    }
    if (blocked || store.queuedAhead(keys, waiter)) {
      if (!plain) {
        store.enlist(keys, waiter, waitMs);
        waiter.enlisted = true;
      }
      return { granted: false, waitMs };
    }
    for (const key of keys) store.set(key, token, ttlMs);
    store.leave(keys, waiter.id);
    return { granted: true, room: 0 };
  }

  extend(lock: Lock, ttlMs: number): Promise<RoundResult> {
    const { store } = this.parts;
    return extendOn(store, () => {
      if (!lock.keys.every((key) => store.get(key) === lock.token)) return false;
      for (const key of lock.keys) store.expire(key, ttlMs);
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
    this.parts.store.delete(key, token);
  }

  /** Compare-and-delete per key: whether any still held `token`. */
  #free(keys: readonly string[], token: string): boolean {
    let freed = false;
    for (const key of keys) if (this.parts.store.delete(key, token)) freed = true;
    return freed;
  }
}
