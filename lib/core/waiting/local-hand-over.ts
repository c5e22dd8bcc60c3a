import { monotonicNow } from '../base/clock.js';
import { Lock, type LockEngine } from '../lock/lock.js';
import type { LocalQueue } from './local-queue.js';
import type { Waiter } from './waiter.js';

/**
 * At most this many times in a row may a lock pass between callers of one process before a real
 * release gives the other processes their turn (fewer when fewer were in line): a process's
 * waiters are served as one batch, which keeps each waiter's wait near that of a perfect queue
 * while most hand-overs cost nothing.
 */
const HAND_OVER_BATCH = 8;

/**
 * Passing a hold between callers of one process without the masters. Per line of callers for
 * the same resources it knows the lock a caller of this process holds and the heads of the line
 * while they sleep (one for a lock; up to the limit for a semaphore's permits). A release
 * finding a head asleep hands it the held keys (a permit, its slots): they stay ours throughout,
 * under the same token, so no other process can slip in and no more holders hold than before,
 * and the waiter skips a release, a wake-up and an acquire round. Not for fenced holds (each
 * holder needs a larger fence), only while half the ttl is left, and only in streaks bounded by
 * who was in line when the streak began.
 */
export class LocalHandOver {
  /** Per line, its heads asleep between their rounds, the longest asleep first. */
  readonly #sleepingHeads = new Map<string, Waiter[]>();
  readonly #streaks = new Map<string, { count: number; limit: number }>();
  readonly #holders = new Map<string, Lock>();
  /** Per line, the caller sent from standing by to ask the masters, until its wait is over (#sendToAsk). */
  readonly #asking = new Map<string, Waiter>();
  #pruneAt = 64;

  constructor(
    private readonly engine: LockEngine,
    private readonly queue: LocalQueue,
  ) {}

  /** The lock a caller of this process holds on `line`, while it is valid. */
  holderOf(line: string): Lock | undefined {
    const holder = this.#holders.get(line);
    return holder && holder.remainingMs() > 0 ? holder : undefined;
  }

  /** Whether a caller of this process sleeps on `line`, between its rounds or standing by for a holder of ours. */
  sleeping(line: string): boolean {
    return this.#sleepingHeads.has(line);
  }

  held(line: string, lock: Lock): void {
    this.#holders.set(line, lock);
    if (this.#holders.size >= this.#pruneAt) this.#prune();
  }

  /** Locks never released (a claim is left to expire) would stay here for good: dropped once expired, at amortised O(1). */
  #prune(): void {
    for (const [line, holder] of this.#holders) if (holder.remainingMs() <= 0) this.#holders.delete(line);
    this.#pruneAt = Math.max(64, this.#holders.size * 2);
  }

  /** Runs `sleep` with `waiter` registered as a head that a release may hand the hold to. */
  async asleep(line: string, waiter: Waiter, sleep: () => Promise<void>): Promise<void> {
    let heads = this.#sleepingHeads.get(line);
    if (!heads) this.#sleepingHeads.set(line, (heads = []));
    heads.push(waiter);
    try {
      await sleep();
    } finally {
      this.#forget(line, waiter);
    }
  }

  #forget(line: string, waiter: Waiter): void {
    const heads = this.#sleepingHeads.get(line);
    if (!heads) return;
    const at = heads.indexOf(waiter);
    if (at !== -1) heads.splice(at, 1);
    if (heads.length === 0) this.#sleepingHeads.delete(line);
    // Queued on the masters and awake: it goes to ask again, for the callers standing by too.
    else if (waiter.enlisted && !waiter.handed) this.#asker(line, waiter);
  }

  /** Hands `lock` to the longest-sleeping head of `line`, if the rules allow: the new handle, or undefined. */
  offer(lock: Lock, line: string): { handed: Lock; to: Waiter } | undefined {
    const heads = this.#sleepingHeads.get(line);
    if (!heads || lock.fence !== undefined) return undefined;
    // Who is in line: the heads asleep (one for a lock, up to the limit for permits) and those behind them.
    const inLine = heads.length + this.queue.waiting(line);
    const streak = this.#streaks.get(line) ?? { count: 0, limit: Math.min(HAND_OVER_BATCH, inLine) };
    const remaining = lock.remainingMs();
    if (streak.count >= streak.limit || remaining < lock.ttlMs / 2) return undefined;
    // The same hold under the same token: its kind and, for a permit, its slots go with it.
    const handed = new Lock(this.engine, lock.resources, lock.keys, lock.token, lock.ttlMs, monotonicNow() + remaining, undefined, lock.kind, lock.slots);
    // The longest asleep that can take it: a head between its pause's steps (its SUBSCRIBE still
    // out) cannot, and must not cost the heads asleep behind it their hand-over.
    const next = heads.find((head) => head.offer(handed));
    if (!next) return undefined;
    this.#forget(line, next);
    this.#streaks.set(line, { count: streak.count + 1, limit: streak.limit });
    this.#holders.set(line, handed);
    return { handed, to: next };
  }

  /** A real release of `lock` is under way: the streak ends and the line has no local holder. */
  released(lock: Lock, line: string): void {
    this.#streaks.delete(line);
    if (this.#holders.get(line) === lock) this.#holders.delete(line);
  }

  /**
   * After a real release: the next caller may be standing by without a place in the masters'
   * queue, and so may others behind it (see #wakeStrandedStandBys). `mastersName`: the release
   * named the masters' next waiter to it.
   */
  wakeNext(line: string, mastersName: boolean): void {
    const heads = this.#sleepingHeads.get(line);
    if (!heads) return;
    // Where releases name the masters' next waiter (hand-off on), a head queued on the masters is
    // named when its turn comes, and the key channel it listens to hears a key freed for anyone.
    // Woken here it would send a round the masters refuse whenever their next waiter is another
    // process's: on that waiter's path, since the masters and both processes share the machine.
    if (!mastersName) heads[0]!.wakeNow();
    // With none of ours queued there, one caller standing by goes to ask: the hold may be free on
    // the masters, and if not, that caller takes this process's place in their queue.
    else if (!heads.some((head) => head.enlisted)) this.#sendToAsk(line, heads[0]!);
    this.#wakeStrandedStandBys(line);
  }

  /**
   * Callers standing by (not in the masters' queues) wait for a holder of ours to hand them a
   * permit, or for a caller of ours in the masters' queues to get one and do so. With neither
   * left, nobody would: the longest standing by goes and asks.
   */
  #wakeStrandedStandBys(line: string): void {
    const heads = this.#sleepingHeads.get(line);
    if (!heads || this.holderOf(line) || heads.some((head) => head.enlisted)) return;
    this.#sendToAsk(line, heads[0]!);
  }

  /**
   * One caller of a line at a time goes from standing by to ask the masters: it gets a hold (and
   * a grant that left room wakes the line, LocalQueue.wakeHeads), or is queued on the masters, or
   * gives up, and only then may another go. Woken all at once, every caller standing by sent a
   * round the masters refused whenever the permits were all taken again (in the hot-semaphore
   * bench, half of all rounds).
   */
  #sendToAsk(line: string, head: Waiter): void {
    if (this.#asker(line, head)) head.wakeNow();
  }

  /** `waiter` asks the masters for its line, unless one already does (false). */
  #asker(line: string, waiter: Waiter): boolean {
    if (this.#asking.has(line)) return false;
    this.#asking.set(line, waiter);
    waiter.whenClosed(() => {
      if (this.#asking.get(line) !== waiter) return;
      this.#asking.delete(line);
      this.#wakeStrandedStandBys(line);
    });
    return true;
  }
}

/** Callers for the same resources (in the same order) form one line. */
export function lineOf(keys: readonly string[]): string {
  return keys.length === 1 ? keys[0]! : keys.join('\n');
}
