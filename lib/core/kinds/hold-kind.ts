import type { RoundOutcomes } from '../base/errors.js';
import type { GuardedAcquire } from '../lock/instrumentation-guard.js';
import type { LockKind } from '../lock/lock-kind.js';
import type { Lock, ReleaseResult } from '../lock/lock.js';
import type { EngineRounds } from '../rounds/engine-rounds.js';
import type { RoundResult } from '../rounds/quorum-round.js';
import type { RoundFailure } from '../rounds/round-failure.js';
import type { VoterAdmission } from '../voters/voter-admission.js';
import type { HandOffGrant, HandOffGrants } from '../waiting/hand-off-grants.js';
import type { LocalHandOver } from '../waiting/local-hand-over.js';
import type { LocalQueue } from '../waiting/local-queue.js';
import type { QueueEntries } from '../waiting/queue-entries.js';
import type { SharedHoldsHere } from '../waiting/shared-holds-here.js';
import type { Waiter } from '../waiting/waiter.js';

/**
 * A lock kind (the exclusive lock, readers, permits of a semaphore): how a hold of it is taken,
 * extended and given back on the masters, and how this process's callers after it line up. The
 * acquire loop (acquire/lock-acquirer.ts) and the engine know a kind only through this; each kind
 * lives in its own folder with its scripts, and is made in one place (kinds/kinds.ts).
 */
export interface HoldKind {
  /** What the kind is, as a lock reports it and errors name it. */
  readonly kind: LockKind;
  /**
   * How many of this process's callers for the same resources may talk to the masters at once.
   * 1: one at a time, and a lock can pass from one to the next without the masters (hand-over).
   */
  readonly width: number;
  /** This process's line for the lock keys `line` (see lineOf): kinds that share stand apart from writers. */
  localLine(line: string): string;
  /** Whether a caller that will not wait still lines up behind this process's earlier callers. */
  linesUp(waits: boolean): boolean;
  /** One acquire attempt: a round (or two, with fencing), the lock if a majority granted it in time. */
  attempt(call: AttemptCall): Promise<Attempted>;
  /** A caller of this process that holds `line` now, free by the end of its validity at the latest. */
  holderHere(line: string): Lock | undefined;
  /**
   * For how long (ms) at most a new caller for `line` waits for callers of this process instead
   * of asking the masters, who would only refuse it now; undefined: it asks.
   */
  standByMs(line: string): number | undefined;
  /** Between rounds: sleeps `pause`, where a release or a grant in this process can wake the waiter sooner. */
  sleep(localLine: string, waiter: Waiter, pause: () => Promise<void>, handOver: boolean): Promise<void>;
  /** For a caller that waits: the masters may grant it the lock when it is released (server-side hand-off). */
  grantsFor(call: GrantCall): HandOffGrants | undefined;
  /** The lock a majority granted by hand-off (only for a waiter given `grantsFor`' grants). */
  handedOff(call: AttemptCall, grant: HandOffGrant): Lock;
  /** The extension round: granted where the hold still stands, which then lasts `ttlMs` from now. */
  extend(lock: Lock, ttlMs: number): Promise<RoundResult>;
  /** Gives the hold back on every master (or to a caller of this process waiting for it). */
  release(lock: Lock, held: HeldBy | undefined): Promise<ReleaseResult>;
  /**
   * The hold leaves this process without being given back (`lock.handOver()`): the masters keep
   * it for its new holder, and this process's callers after it ask the masters like anyone else.
   */
  handAway(lock: Lock, held: HeldBy | undefined): void;
  /** Why `lock` may not leave this process now (`lock.handOver()`), if it may not: checked before handAway. */
  handOverRefusal?(lock: Lock): string | undefined;
}

/** An engine's kinds: the one for each kind a caller's options parse into (kinds/kinds.ts, or another engine's). */
export interface HoldKinds {
  of(kind: LockKind): HoldKind;
}

/** One acquire attempt's arguments. */
export interface AttemptCall {
  readonly resources: string[];
  /** The lock keys, one per resource. */
  readonly keys: string[];
  readonly ttlMs: number;
  /** 1 for the call's first round. */
  readonly attempt: number;
  readonly fencing: boolean;
  readonly waiter: Waiter;
  /** Nobody of this process is after these resources: a first try may skip the masters' queue. */
  readonly uncontended: boolean;
  readonly observer: GuardedAcquire | undefined;
}

export interface GrantCall {
  readonly keys: string[];
  readonly fencing: boolean;
  readonly waits: boolean;
}

/**
 * A lock, with `room`: how many more callers of the same kind (and weight) may get a hold at once
 * too, as the grant found it (0 for none; Infinity for readers, who all fit), and
 * what each master did in the round that won it (undefined: it came without one).
 */
export type Attempted = { lock: Lock; room: number; outcomes: RoundOutcomes | undefined } | RoundFailure;

/** How a lock being released was acquired. */
export interface HeldBy {
  /** The winning round (undefined: taken without a scripted round, or handed over). */
  readonly round: RoundResult | undefined;
  readonly waiter: Waiter;
  /**
   * The waiter's id when a master may still hold a queue entry of it (one answer of the winning
   * round may still land), else '': the release script drops it with the key. No hold owes the
   * masters a leave of its own: a hold begins with its waiter's entries withdrawn, by the round or
   * grant that won it (QueueEntries.withdrawWhereRefused) or by its hand-over (handOverOrFree),
   * and a plain SET NX queues nobody.
   */
  readonly waiterId: string;
}

/** What a kind uses of its engine. */
export interface KindParts extends EngineRounds {
  readonly entries: QueueEntries;
  readonly admission: VoterAdmission;
  readonly localQueue: LocalQueue;
  readonly handOver: LocalHandOver;
  /** Whether releases may grant locks to the head of the masters' queue (see HandOffGrants). */
  readonly handsOff: boolean;
  /** Where this process holds readers or permits: its writers' first try there goes to the queue. */
  readonly sharedHere: SharedHoldsHere;
  /** A new hold, held since `since` (monotonic ms): registered as the engine registers its locks. */
  held(lock: Lock, round: RoundResult | undefined, waiter: Waiter, queuing: boolean, since?: number): void;
}
