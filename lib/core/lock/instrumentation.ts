import type { Lock } from './lock.js';

/**
 * How one acquire call ended: `held` when another owner held the lock and the caller would not
 * wait (tryAcquire, `retryCount: 0`), `timed_out` when it waited and gave up (wait timeout or
 * retries spent), `unreachable` when too few masters answered, `aborted` when the caller's
 * signal fired, `error` for anything else.
 */
export type AcquireOutcome = 'acquired' | 'held' | 'timed_out' | 'unreachable' | 'aborted' | 'error';

/** How one extension ended: `lost` when a majority no longer held the lock or it had expired. */
export type ExtensionOutcome = 'extended' | 'lost' | 'unreachable' | 'limit';

/**
 * Why a held lock was lost: `refused` when an extension found a majority no longer holding our
 * token, `expired` when its validity ran out first, `extension_limit` when `maxExtensions` was
 * reached and it then ran out, `error` for anything else that stopped its extension.
 */
export type LostReason = 'refused' | 'expired' | 'extension_limit' | 'error';

/**
 * Which request failed on a master. Acquire includes the second round of a fenced acquisition;
 * `wakeup` is the connection that hears releases for waiters (the master sent what a subscribed
 * connection cannot get, or refused AUTH or SUBSCRIBE).
 */
export type MasterOperation = RoundOperation | 'wakeup';

/** The operations that run as a round of requests to every master. */
export type RoundOperation = 'acquire' | 'extend' | 'release';

/**
 * `timeout`: no answer within the round's node timeout; `error`: the request failed (connection
 * down, a Redis error, a reply of the wrong shape, a second name for a server already listed).
 * A master in restart quarantine is not asked, so it is neither.
 */
export type MasterFailure = 'timeout' | 'error';

/**
 * How one `@WithLock` call ended: `ran` (the method ran under the lock and returned), `threw`
 * (it ran and threw), `not_locked` (the lock could not be had: the error went to the caller),
 * `skipped` (held elsewhere and the policy says to skip the call), `cancelled` (an Observable
 * result unsubscribed before it ended).
 */
export type CallOutcome = 'ran' | 'threw' | 'not_locked' | 'skipped' | 'cancelled';

/** Where a master is, for telemetry: never credentials. */
export interface MasterAddress {
  /** As errors name it: `host:port`, a socket path, `sentinel:<name>@<first sentinel>` or `cluster:<first startup node>`. */
  readonly name: string;
  /** The host name or IP address (IPv6 without brackets), the socket path, the Sentinel group name, or a Cluster startup node's host. */
  readonly address: string;
  /** The TCP port; undefined for a socket path or a Sentinel group. */
  readonly port: number | undefined;
}

/** Follows one acquire call, from `acquireStarted` to `ended` (called exactly once). */
export interface AcquireObserver {
  /**
   * One round (one request to every master, and for a fenced lock the fence's second request) was
   * decided; `granted` masters had granted it by then (stragglers answer later). `durationMs` runs
   * from just before its requests went out to its decision: the span its lock's validity counts
   * from, as the engine measured it.
   */
  round?(granted: number, durationMs: number): void;
  /** The lock was granted by hand-off (no round of the caller's own): `granted` masters had granted it. */
  handedOff?(granted: number): void;
  /** The call had to wait (held elsewhere, or masters in restart quarantine); its waiting lasts until `ended`. Called at most once. */
  waiting?(): void;
  /**
   * The call ended: `durationMs` from the call to its lock or error, `waitedMs` from `waiting` to
   * then (undefined if it never waited). The engine measures both on the monotonic clock it reads
   * anyway, so an observer needs no clock of its own on the lock's hot path.
   */
  ended?(outcome: AcquireOutcome, error: unknown, durationMs: number, waitedMs: number | undefined): void;
}

/** Follows one `@WithLock` call, from `callStarted` to `ended` (called exactly once). */
export interface CallObserver {
  /**
   * Runs the call (taking the lock and the method) in this observer's context, so that what
   * `acquireStarted` sees as the current context is the call's: a tracer makes the call's span
   * the parent of the acquire span here. Must call `work` once and return what it returns.
   */
  run?<T>(work: () => T): T;
  /** The call is over: how it ended, and the error it threw, if any. */
  ended?(outcome: CallOutcome, error: unknown): void;
}

/** How a leadership ended: the `'ended'` event of an election, and the `leadershipEnded` hook. */
export interface LeadershipEnd {
  /** The election's name. */
  readonly election: string;
  /** Who led. */
  readonly identity: string;
  /** The term that ended. */
  readonly term: number;
  /** `'resigned'`: `resign()`, or the engine released it (`releaseAll` at shutdown); `'lost'`: it could no longer be relied on. */
  readonly reason: 'resigned' | 'lost';
  /** For a loss: why (the renewal refused or unanswered, or the lease ran out while the process stalled). */
  readonly error?: Error;
  /** How long it led, in ms. */
  readonly heldMs: number;
}

/**
 * Hooks the engine calls as it works, for metrics and traces: pass an implementation as the
 * `instrumentation` option (`nestjs-redlock/opentelemetry` has one for OpenTelemetry). Every
 * hook is optional. Hooks run synchronously on the engine's path, so keep them cheap; one that
 * throws is reported once through the engine's logger and otherwise ignored.
 *
 * `acquireStarted` is called synchronously in the caller's async context, before anything is
 * sent. Each lock that `lockHeld` reports later ends exactly once: `lockReleased` or `lockLost`.
 */
export interface RedlockInstrumentation {
  /** An acquire call (acquire, tryAcquire, using, enter, a decorated call) begins. */
  acquireStarted?(resources: readonly string[], ttlMs: number): AcquireObserver | undefined;
  /** A lock is held from now on (acquired, or handed over by a caller of this process). */
  lockHeld?(lock: Lock): void;
  /** Released after `heldMs` held. */
  lockReleased?(lock: Lock, heldMs: number): void;
  /** This process won `election` as `identity`, in `term`. */
  leadershipWon?(election: string, identity: string, term: number): void;
  /** A leadership this process won ended. */
  leadershipEnded?(end: LeadershipEnd): void;
  /** A held lock must no longer be relied on, after `heldMs` held; its release, if any, is not reported again. */
  lockLost?(lock: Lock, reason: LostReason, error: unknown, heldMs: number): void;
  /** An extension of a held lock (automatic or by hand) ended, with this outcome. */
  extensionEnded?(lock: Lock, outcome: ExtensionOutcome): void;
  /** A request to one master failed or timed out, in a round of `operation`. */
  masterFailed?(master: MasterAddress, failure: MasterFailure, operation: MasterOperation): void;
  /** A `@WithLock` call begins; `site` is `ClassName.methodName`. Called by the Nest layer. */
  callStarted?(site: string): CallObserver | undefined;
}
