/**
 * The names RedlockTelemetry reports under, for dashboards, alerts and Views. Durations are in
 * seconds (unit `s`), counts in `{lock}`, `{waiter}` and the like, as OpenTelemetry's conventions ask.
 */

/** The instrumentation scope of the meter and the tracer. */
export const INSTRUMENTATION_SCOPE = 'nestjs-redlock';

/** Histogram, s: one acquire call, from the call to the lock or the error; `redlock.outcome`. */
export const METRIC_ACQUIRE_DURATION = 'redlock.acquire.duration';
/** Histogram, s: the part of an acquire call spent waiting (held elsewhere, restart quarantine); only calls that waited; `redlock.outcome`. */
export const METRIC_WAIT_DURATION = 'redlock.wait.duration';
/** Histogram, s: how long a lock was held, from acquired to released or lost (no outcome: `redlock.lost_locks` counts the lost). */
export const METRIC_LOCK_DURATION = 'redlock.lock.duration';
/** UpDownCounter (observed at collection), `{lock}`: locks this process holds now. */
export const METRIC_LOCK_COUNT = 'redlock.lock.count';
/** UpDownCounter (observed at collection), `{waiter}`: acquire calls of this process waiting now. */
export const METRIC_WAITER_COUNT = 'redlock.waiter.count';
/** Counter, `{lock}`: held locks that were lost; `redlock.lost.reason`. */
export const METRIC_LOST_LOCKS = 'redlock.lost_locks';
/** Counter, `{extension}`: extension attempts; `redlock.outcome` = extended | lost | unreachable | limit. */
export const METRIC_EXTENSIONS = 'redlock.extensions';
/** Counter, `{error}`: requests to one master that failed or timed out; `server.address`, `server.port`, `error.type`, `redlock.operation`. */
export const METRIC_MASTER_ERRORS = 'redlock.master.errors';
/** Histogram, s: one `@WithLock` call, lock and method together; `code.function.name`, `redlock.outcome`. */
export const METRIC_CALL_DURATION = 'redlock.call.duration';
/** Counter, `{election}`: elections this process won, by `redlock.election`. */
export const METRIC_LEADERSHIP_ELECTIONS = 'redlock.leadership.elections';
/** Counter, `{election}`: leaderships of this process that were lost (not resigned), by `redlock.election`. */
export const METRIC_LEADERSHIP_LOSSES = 'redlock.leadership.losses';
/** Histogram, `s`: how long this process led, from won to resigned or lost, by `redlock.election` and `redlock.leadership.end`. */
export const METRIC_LEADERSHIP_DURATION = 'redlock.leadership.duration';
/** Observable gauge, `{term}`: the term this process leads in now, by `redlock.election`; absent while it does not lead. */
export const METRIC_LEADERSHIP_TERM = 'redlock.leadership.term';

/** What ended the operation: an AcquireOutcome, ExtensionOutcome or CallOutcome. */
export const ATTR_REDLOCK_OUTCOME = 'redlock.outcome';
/** The election's name (few and fixed per app, unlike resource names). */
export const ATTR_REDLOCK_ELECTION = 'redlock.election';
/** How a leadership ended: `resigned` or `lost`. */
export const ATTR_REDLOCK_LEADERSHIP_END = 'redlock.leadership.end';
/** Why a lock was lost: refused | expired | extension_limit | error. */
export const ATTR_REDLOCK_LOST_REASON = 'redlock.lost.reason';
/** acquire | extend | release: the kind of round a master failed in; wakeup: its connection for wake-ups. */
export const ATTR_REDLOCK_OPERATION = 'redlock.operation';
/** The resource names of the lock (string array); only with `resourceAttributes: true`. */
export const ATTR_REDLOCK_RESOURCES = 'redlock.resources';
/** Span: rounds the acquire call ran (one request to every master each). */
export const ATTR_REDLOCK_ACQUIRE_ROUNDS = 'redlock.acquire.rounds';
/** Span: masters that had granted the acquire call's last round when it was decided (a quorum, on success; stragglers answer later). */
export const ATTR_REDLOCK_ACQUIRE_GRANTED = 'redlock.acquire.granted';
/** Semantic-convention attribute: the failed master's host (on `redlock.master.errors`). */
export const ATTR_SERVER_ADDRESS = 'server.address';
/** Semantic-convention attribute: the failed master's port (on `redlock.master.errors`). */
export const ATTR_SERVER_PORT = 'server.port';
/** Semantic-convention attribute: on `redlock.master.errors`, `timeout` or `error`; on a failed span, the error's code (`LOCK_HELD`) or class name. */
export const ATTR_ERROR_TYPE = 'error.type';
/** Semantic-convention attribute: the decorated method, `Class.method` (on `@WithLock` calls). */
export const ATTR_CODE_FUNCTION_NAME = 'code.function.name';

/** Span name of an acquire call. */
export const SPAN_ACQUIRE = 'redlock.acquire';
/** Span name of a decorated call: this prefix, then `Class.method`. */
export const SPAN_CALL_PREFIX = 'WithLock ';

/** Acquire and wait: from a sub-millisecond uncontended round to a long wait in line. */
export const LATENCY_BUCKETS_S = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Locks held and decorated calls: from a quick critical section to a job that extends for an hour. */
export const HOLD_BUCKETS_S = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
