import { monotonicNow } from '../base/clock.js';
import { AcquireAbortedError, LockHeldError, QuorumError, QuorumUnreachableError, type RoundOutcomes } from '../base/errors.js';
import { heldSince } from './held-locks.js';
import type { GuardedAcquire, InstrumentationGuard } from '../lock/instrumentation-guard.js';
import type { KeyNames } from '../rounds/key-names.js';
import { kindOf } from '../lock/lock-kind.js';
import type { Lock } from '../lock/lock.js';
import { lineOf } from '../waiting/local-hand-over.js';
import type { LocalQueue } from '../waiting/local-queue.js';
import type { QueueLeaving } from '../waiting/queue-entries.js';
import type { AcquireOptions } from '../lock/acquire-options.js';
import { resolveWait, type ResolvedRedlockOptions } from '../lock/redlock-options.js';
import type { WakeupSource } from '../waiting/release-wakeups.js';
import type { RestartQuarantine } from '../voters/restart-quarantine.js';
import type { HoldKind, HoldKinds } from '../kinds/hold-kind.js';
import { Waiter } from '../waiting/waiter.js';

/**
 * Rounds in which too few masters answered are retried this many times only: enough to ride
 * out a blip or a stall under load, few enough that callers hear of a majority outage within
 * three node timeouts (about 3 s by default with a ttl of 10 s or more) instead of waiting out
 * their whole budget.
 */
const UNREACHABLE_RETRIES = 2;

/** What the acquire path uses of its engine. */
export interface AcquirerParts {
  readonly quorum: number;
  readonly options: ResolvedRedlockOptions;
  readonly names: KeyNames;
  readonly localQueue: LocalQueue;
  readonly entries: QueueLeaving;
  readonly kinds: HoldKinds;
  readonly wakeups: WakeupSource | undefined;
  readonly quarantine: Pick<RestartQuarantine, 'observeTtl'> | undefined;
  readonly instrumentation: InstrumentationGuard | undefined;
}

/**
 * An acquire call from its arguments to its lock: this process's line for the resources, the
 * rounds, the waits between them in the masters' queues, and the two ways a lock can come
 * without a round of its own (handed over in this process, granted by hand-off on the masters).
 */
export class LockAcquirer {
  readonly #parts: AcquirerParts;
  /**
   * Acquire calls past this process's line, with their resources, from their first round (a
   * call whose round is out when releaseAll runs must give back what that round wins):
   * releaseAll makes them give up.
   */
  readonly #waiting = new Map<Waiter, string[]>();
  /** The calls started since the last releaseAll, those still in this process's line included. */
  #calls = new CallsInProgress();

  constructor(parts: AcquirerParts) {
    this.#parts = parts;
  }

  /** `list`, `ttlMs` and `options` as checkCall passed them: the engine's entry points check a call once. */
  async acquire(list: string[], ttlMs: number, options: AcquireOptions, queues: boolean): Promise<Lock> {
    const { options: engineOptions, localQueue, entries } = this.#parts;
    const wait = resolveWait(options, engineOptions);
    const kind = this.#parts.kinds.of(kindOf(options));
    const fencing = options.fencing ?? engineOptions.fencing;
    const keys: string[] = []; // packed, see runRound
    for (const resource of list) keys.push(this.#parts.names.lock(resource));
    const startedAt = monotonicNow();
    const giveUpAt = startedAt + wait.waitTimeoutMs;
    const line = lineOf(keys);
    const width = kind.width;
    // Before the first await, so in the caller's async context: a tracer's span gets the caller's as parent.
    const observer = this.#parts.instrumentation?.acquireStarted(list, ttlMs, startedAt);

    // A caller that will not wait (tryAcquire, retryCount 0) does not wait in line either.
    const waits = queues && wait.retryCount > 0;
    const paced = kind.linesUp(waits);
    const localLine = kind.localLine(line);
    // Nobody of this process is after these resources: the first try may skip the masters' queue.
    const first = paced ? localQueue.enter(localLine, width) : true;
    let uncontended = first;
    const calls = this.#calls;
    calls.count++;
    let predecessorFoundNoQuorum = false;
    if (!first) {
      try {
        predecessorFoundNoQuorum = await this.#joinLocalLine(kind, localLine, width, list, options.signal, waits ? wait.waitTimeoutMs : 0, observer);
      } catch (error) {
        calls.ended();
        throw error;
      }
    }
    // Only a caller that will wait takes a place in the masters' queues: an entry of one that will
    // not come back would stand ahead of real waiters, and stretch every Retry-After behind it.
    // A release may grant the lock to the head of the masters' queue, for kinds that allow it.
    // Made only once a round needs them: an uncontended acquire's plain try does not.
    const grants = () => kind.grantsFor({ keys, fencing, waits });
    const unannounced = engineOptions.keyFormat === 'node-redlock';
    const waiter = new Waiter(waits, this.#parts.wakeups, keys, wait, options.signal, this.#parts.quorum, grants, unannounced);
    const call = { resources: list, keys, ttlMs, attempt: 0, fencing, waiter, uncontended, observer };
    /** The lock the masters granted this waiter by hand-off, unless releaseAll made it give up. */
    const handedOffByMasters = () => (waiter.granted && !waiter.abandoned ? kind.handedOff(call, waiter.granted) : undefined);
    let attempt = 0;
    /** What the masters answered in each failed round so far: for the lock or the error (QuorumError.rounds). */
    let failedRounds: RoundOutcomes[] | undefined;
    // Behind a caller that just found no quorum, one round is enough to confirm the outage.
    let unreachableRounds = predecessorFoundNoQuorum ? UNREACHABLE_RETRIES : 0;
    let foundNoQuorum = false;
    /** The last failed attempt's cleanup: a caller that gives up waits for it, so it leaves nothing behind. */
    let cleanup: Promise<unknown> | undefined;
    this.#waiting.set(waiter, list);
    // releaseAll ran while this call waited in this process's line: its turn came only because the head gave up.
    if (calls.abandoned) waiter.abandon(calls.abandoned.reason);
    try {
      for (;;) {
        attempt++;
        if (options.signal?.aborted) throw new AcquireAbortedError(list, options.signal.reason);
        if (waiter.abandoned) throw new AcquireAbortedError(list, waiter.abandoned.reason);
        const standByMs = attempt === 1 && waits && !fencing ? kind.standByMs(line) : undefined;
        if (standByMs !== undefined) {
          uncontended = false;
          // Asking the masters would only be refused: wait for the callers of this process ahead.
          const standBy = () => waiter.standBy(Math.min(giveUpAt - monotonicNow(), standByMs));
          observer?.waiting();
          try {
            await kind.sleep(localLine, waiter, standBy, true);
          } catch {
            throw new AcquireAbortedError(list, abortReason(waiter, options.signal));
          }
          if (waiter.handed) return acquired(observer, waiter.handed);
        }
        const result = await kind.attempt({ ...call, attempt, uncontended });
        if ('lock' in result) {
          result.lock.recordRounds(failedRounds, result.outcomes);
          if (waiter.abandoned) return await giveBack(result.lock, list, waiter);
          if (result.room > 0 && paced) localQueue.wakeHeads(localLine, result.room);
          return acquired(observer, result.lock);
        }
        cleanup = result.cleanup;
        if (result.error instanceof QuorumError && result.error.nodes.length > 0) (failedRounds ??= []).push(result.error.nodes);
        // Granted by hand-off while the round was out (the grants came before its refusals).
        const grantedDuringRound = handedOffByMasters();
        if (grantedDuringRound) return acquired(observer, grantedDuringRound);
        const left = giveUpAt - monotonicNow();
        if (!result.retryable) unreachableRounds++;
        const retryable = result.retryable || unreachableRounds <= UNREACHABLE_RETRIES;
        // A quarantine that outlasts the budget: say so now, with when to come back, not at the deadline.
        const outlasts = result.error instanceof QuorumUnreachableError && (result.error.retryAfterMs ?? 0) > left;
        if (!retryable || outlasts || attempt > wait.retryCount || left <= 0) {
          entries.leave(list, waiter, '');
          foundNoQuorum = !retryable;
          if (failedRounds && result.error instanceof QuorumError) result.error.recordRounds(failedRounds);
          throw result.error;
        }
        // Asleep, this head can be handed the lock by a caller of this process releasing it.
        const pause = () => waiter.pause(result.error, left);
        // Waiting for a holder or for a quarantine to end; a retry after a blip is not waiting.
        if (observer && !(result.error instanceof QuorumUnreachableError && result.error.retryAfterMs === undefined)) observer.waiting();
        try {
          await kind.sleep(localLine, waiter, pause, !fencing && queues);
        } catch {
          entries.leave(list, waiter, '');
          throw new AcquireAbortedError(list, abortReason(waiter, options.signal));
        }
        // Handed over in this process: its entries on the masters went with the hand-over (handOverOrFree).
        if (waiter.handed) return acquired(observer, waiter.handed);
        const grantedAsleep = handedOffByMasters();
        if (grantedAsleep) return acquired(observer, grantedAsleep);
      }
    } catch (error) {
      await cleanup;
      observer?.failed(error, waits);
      throw error;
    } finally {
      this.#waiting.delete(waiter);
      waiter.close();
      if (paced) localQueue.leave(localLine, foundNoQuorum);
      calls.ended();
    }
  }

  /**
   * For releaseAll: makes every call in progress give up (AcquireAbortedError with `reason`),
   * those waiting in this process's line as their turns come (at once: each head ahead of them
   * gives up too), and withdraws their entries from the masters' queues; resolves once they are
   * withdrawn and every call has ended, having given back whatever a round out meanwhile won.
   */
  abandonAll(reason: string): Promise<unknown> {
    const calls = this.#calls;
    this.#calls = new CallsInProgress();
    const ended = calls.abandon(reason);
    const leaving = [...this.#waiting].map(([waiter, resources]) => {
      waiter.abandon(reason);
      return this.#parts.entries.leaveNow(resources, waiter, '');
    });
    return Promise.all([...leaving, ended]);
  }

  /** Waits behind this process's earlier callers for the same resources, within the wait budget. */
  async #joinLocalLine(
    kind: HoldKind,
    line: string,
    width: number,
    resources: string[],
    signal: AbortSignal | undefined,
    budgetMs: number,
    observer: GuardedAcquire | undefined,
  ): Promise<boolean> {
    if (budgetMs > 0) observer?.waiting();
    try {
      return await this.#parts.localQueue.join(line, signal, Math.max(1, budgetMs), width);
    } catch {
      // Behind a caller of this process: if one of ours holds the lock, it is free by then at the latest.
      const error = signal?.aborted
        ? new AcquireAbortedError(resources, signal.reason)
        : new LockHeldError(resources, [], 0, kind.holderHere(line)?.remainingMs());
      observer?.failed(error, budgetMs > 0);
      throw error;
    }
  }
}

/**
 * The acquire calls started between two releaseAll calls: how many have not ended, and whether
 * the second made them give up. One counter for them all, not a promise per call: an
 * uncontended acquire allocates nothing for it.
 */
class CallsInProgress {
  count = 0;
  abandoned: { reason: unknown } | undefined;
  #ended: (() => void) | undefined;

  ended(): void {
    if (--this.count === 0) this.#ended?.();
  }

  /** Marks these calls given up; resolves once none is in progress. */
  abandon(reason: unknown): Promise<void> {
    this.abandoned = { reason };
    return this.count === 0 ? Promise.resolve() : new Promise((resolve) => (this.#ended = resolve));
  }
}

/**
 * A call that releaseAll made give up while its round won: the leave sent then may already
 * have freed its keys (a hand-off waiter's tokens all go), so the lock is released, not used.
 */
async function giveBack(lock: Lock, resources: string[], waiter: Waiter): Promise<never> {
  await lock.release();
  throw new AcquireAbortedError(resources, waiter.abandoned!.reason);
}

/** Why a wait was cut short: releaseAll's reason, or the caller's signal's. */
function abortReason(waiter: Waiter, signal: AbortSignal | undefined): unknown {
  const abandoned = waiter.abandoned;
  return abandoned ? abandoned.reason : signal?.reason;
}

/** An acquire call that got its lock: the observer hears of it, the caller gets it. */
function acquired(observer: GuardedAcquire | undefined, lock: Lock): Lock {
  observer?.ended('acquired', undefined, heldSince(lock));
  return lock;
}
