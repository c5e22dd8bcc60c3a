import { writeFileSync } from 'node:fs';

/**
 * The history of one safety run: every operation every worker performed, as invoke / ok / fail /
 * unknown events, plus what the fenced store applied and which faults were injected.
 *
 * Times are `process.hrtime.bigint()`: CLOCK_MONOTONIC, one clock for every process on this
 * machine, so events recorded in different worker processes lie on one time line. The engine's
 * `performance.now()` reads the same clock, which is what lets a worker turn `lock.remainingMs()`
 * into an absolute `validUntil` on this time line.
 */

export type Phase = 'invoke' | 'ok' | 'fail' | 'unknown';

export type Op =
  /** A worker's call to acquire (one round when `single`, else the engine's waiting acquire). */
  | 'acquire'
  | 'extend'
  | 'release'
  /** A worker reading / writing the fenced store (the worker's side: invoke, then ok or fail). */
  | 'read'
  | 'write'
  /** What the store applied, in its own order (`seq`); recorded by the store, phase ok or fail. */
  | 'store-read'
  | 'store-write'
  /** A timing probe on a resource of its own (the paused-master scenario). */
  | 'probe'
  | 'probe-release'
  /** A holder that blocked its own event loop, and what its lost-lock signal said afterwards. */
  | 'stall'
  /** A fault the scenario injected (kill, restart, pause, lost reply...). */
  | 'fault'
  /** A master a worker's engine put in restart quarantine. */
  | 'quarantine'
  /** What a worker's engine said through its logger (note: the message). */
  | 'warning'
  /** The store's final state for one resource, recorded once at the end. */
  | 'final';

export interface HistoryEvent {
  /** Which process: a worker process label, 'store', 'fault', or the scenario's own client. */
  proc: string;
  /** Which async worker inside the process. */
  worker: number;
  op: Op;
  phase: Phase;
  t: bigint;
  /** Links the invoke event of one operation to its ok / fail / unknown event. */
  id?: string;
  resource?: string;
  /** The lock's token: one holder's, or, for readers of one process sharing a hold, theirs together. */
  token?: string;
  fence?: number;
  /**
   * acquire ok, extend ok or fail: until when the lock may be relied on, on the shared clock, as
   * the lock itself said right after the call.
   */
  validUntil?: bigint;
  ttl?: number;
  driftFactor?: number;
  /** acquire: the call was exactly one round (tryAcquire), so its elapsed time is the round's. */
  single?: boolean;
  /**
   * acquire ok of a single round: when the engine began the call (its observer's acquireStarted,
   * on the shared clock) and how long it took by the engine's clock, to its grant.
   */
  engineStartedAt?: bigint;
  engineMs?: number;
  /**
   * acquire ok of a single round: how long the round took by the engine's clock, from just before
   * its requests went out to its decision (the observer's `round`). The call's time before the
   * round (its own bookkeeping, or the process descheduled there) is not spent from validity.
   */
  engineRoundMs?: number;
  /** acquire ok: a reader (`'read'`); absent for the exclusive lock. */
  mode?: 'read' | 'write';
  /** acquire ok: granted by a release (server-side hand-off), with no round of the caller's own. */
  handedOff?: boolean;
  /** acquire ok: a semaphore's permit, of this limit; absent for limit 1. */
  limit?: number;
  /** acquire ok: how many of the limit's permits it took; absent for 1. */
  permits?: number;
  /** store: the fenced value (read: current; write: the new value). */
  value?: number;
  /** store: the unfenced value, guarded by the lock only (absent: this write did not touch it). */
  plain?: number;
  /** store: position in the store's own order of operations. */
  seq?: number;
  /** store: whether the fence was accepted. */
  accepted?: boolean;
  /** fail: the error's stable code (`QUORUM_UNREACHABLE`...), or its class name. */
  code?: string;
  error?: string;
  note?: string;
  /** release ok: masters that deleted our key; whether a quorum still held it. */
  releasedOn?: number;
  heldUntilRelease?: boolean;
  /** stall: the lost-lock signal fired, and its reason's code. */
  signalFired?: boolean;
}

export const now = (): bigint => process.hrtime.bigint();

export const ms = (ns: bigint): number => Number(ns) / 1e6;

export const nsFromMs = (milliseconds: number): bigint => BigInt(Math.round(milliseconds * 1e6));

/**
 * A lock's deadline when an extend of it is called at `invokedAt`: `remainingMs` ahead while it
 * has time left; once it has none it says only that the deadline has passed, and the deadline it
 * last stated in the history (`lastClaim`) is when, not the time of the call, which a stalled
 * event loop can put long after it.
 */
export function deadlineAtCall(invokedAt: bigint, remainingMs: number, lastClaim: bigint | undefined): bigint {
  return remainingMs > 0 ? invokedAt + nsFromMs(remainingMs) : (lastClaim ?? invokedAt);
}

/** Append-only. Events arrive roughly, not strictly, in time order (batches from several processes). */
export class History {
  readonly #events: HistoryEvent[] = [];

  record(event: HistoryEvent): void {
    this.#events.push(Object.freeze({ ...event }));
  }

  recordAll(events: readonly HistoryEvent[]): void {
    for (const event of events) this.record(event);
  }

  get size(): number {
    return this.#events.length;
  }

  /** A snapshot, sorted by time (stable). */
  events(): HistoryEvent[] {
    return [...this.#events].sort((a, b) => (a.t < b.t ? -1 : a.t > b.t ? 1 : 0));
  }

  /** Events matching `filter` in arrival order (cheap: for waiting on progress). */
  count(filter: (event: HistoryEvent) => boolean): number {
    let n = 0;
    for (const event of this.#events) if (filter(event)) n++;
    return n;
  }

  /** One JSON object per line, bigints as decimal strings: for looking at a failed run by hand. */
  writeJsonl(file: string): void {
    const lines = this.events().map((event) =>
      JSON.stringify(event, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value)),
    );
    writeFileSync(file, `${lines.join('\n')}\n`);
  }
}
