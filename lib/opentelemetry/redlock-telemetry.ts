import { context, metrics, trace, type MeterProvider, type TracerProvider } from '@opentelemetry/api';
import { InvalidArgumentError } from '../core/base/errors.js';
import type {
  AcquireObserver,
  CallObserver,
  ExtensionOutcome,
  LeadershipEnd,
  LostReason,
  MasterAddress,
  MasterFailure,
  MasterOperation,
  RedlockInstrumentation,
} from '../core/lock/instrumentation.js';
import type { Lock } from '../core/lock/lock.js';
import { RedlockInstruments } from './redlock-instruments.js';
import { SPAN_ACQUIRE } from './telemetry.constants.js';
import { seconds } from './telemetry-values.js';
import { TracedAcquire } from './traced-acquire.js';
import { TracedCall } from './traced-call.js';

/** Where `RedlockTelemetry` reports, and how much it says about the resources locked. */
export interface RedlockTelemetryOptions {
  /**
   * Where the metrics go. Default: the global MeterProvider (`metrics.getMeterProvider()`), as
   * registered when the first lock is taken (so an SDK started after this object is built, but
   * before the app takes locks, is the one used).
   */
  meterProvider?: MeterProvider;
  /** Where the spans go. Default: the global TracerProvider. */
  tracerProvider?: TracerProvider;
  /**
   * Add the resource names (`redlock.resources`) to lock metrics and acquire spans. Off by
   * default: names such as `order:{0}` carry order and user ids, and every distinct name becomes
   * a new series in the metrics backend.
   */
  resourceAttributes?: boolean;
  /**
   * Start an acquire span only when the caller has an active span, the way OpenTelemetry's own
   * Redis instrumentations do by default: a lock taken outside any trace would make a trace of
   * one span, at the price of a span on every lock (a decorated call always gets its span, and
   * its acquire is then its child). Metrics are recorded either way. Default true.
   */
  requireParentSpan?: boolean;
}

/**
 * OpenTelemetry metrics and traces of the lock engine, through `@opentelemetry/api` only: without
 * an SDK installed every call is a no-op. Pass it as the `instrumentation` option:
 * `new Redlock(clients, { instrumentation: new RedlockTelemetry() })` or
 * `RedlockModule.forRoot({ nodes, instrumentation: new RedlockTelemetry() })`. Use one per process:
 * engines can share it, and the counts of locks held and callers waiting are kept per instance,
 * so two instances would report those two counts over each other.
 *
 * Metric names, units and attributes: see `telemetry.constants.ts` and the README.
 */
export class RedlockTelemetry implements RedlockInstrumentation {
  readonly #meterProvider: MeterProvider | undefined;
  readonly #tracerProvider: TracerProvider | undefined;
  readonly #resourceAttributes: boolean;
  readonly #requireParentSpan: boolean;
  #instruments: RedlockInstruments | undefined;
  /** The observer of every acquire without a span or resource names: it keeps nothing of its own. */
  #untraced: TracedAcquire | undefined;

  constructor(options: RedlockTelemetryOptions = {}) {
    if (options === null || typeof options !== 'object') {
      throw new InvalidArgumentError('options', options, 'expected an object of RedlockTelemetry options');
    }
    const { meterProvider, tracerProvider, resourceAttributes = false, requireParentSpan = true } = options;
    if (meterProvider !== undefined && typeof (meterProvider as Partial<MeterProvider> | null)?.getMeter !== 'function') {
      throw new InvalidArgumentError('meterProvider', meterProvider, 'expected a MeterProvider (an object with getMeter)');
    }
    if (tracerProvider !== undefined && typeof (tracerProvider as Partial<TracerProvider> | null)?.getTracer !== 'function') {
      throw new InvalidArgumentError('tracerProvider', tracerProvider, 'expected a TracerProvider (an object with getTracer)');
    }
    for (const [name, value] of [['resourceAttributes', resourceAttributes], ['requireParentSpan', requireParentSpan]] as const) {
      if (typeof value !== 'boolean') throw new InvalidArgumentError(name, value, 'expected true or false');
    }
    this.#meterProvider = meterProvider;
    this.#tracerProvider = tracerProvider;
    this.#resourceAttributes = resourceAttributes;
    this.#requireParentSpan = requireParentSpan;
  }

  /** Starts the acquire call's span (when it has a parent, or `requireParentSpan` is false) and its timers. */
  acquireStarted(resources: readonly string[]): AcquireObserver {
    const instruments = this.#use();
    const reported = instruments.resources(resources);
    const span =
      !this.#requireParentSpan || trace.getSpan(context.active())
        ? instruments.tracer.startSpan(SPAN_ACQUIRE, instruments.spanOptions(reported))
        : undefined;
    if (!span && !reported) return (this.#untraced ??= new TracedAcquire(instruments, undefined, undefined));
    return new TracedAcquire(instruments, reported, span);
  }

  /** Counts the lock in `redlock.lock.count`. */
  lockHeld(lock: Lock): void {
    const instruments = this.#use();
    instruments.locks.add(1, instruments.resources(lock.resources));
  }

  /** Records how long the lock was held (`redlock.lock.duration`). */
  lockReleased(lock: Lock, heldMs: number): void {
    this.#ended(lock, heldMs);
  }

  /** Counts the loss by reason (`redlock.lost_locks`) and records how long the lock was held. */
  lockLost(lock: Lock, reason: LostReason, _error: unknown, heldMs: number): void {
    const instruments = this.#use();
    instruments.lostLocks.add(1, instruments.lostReason(reason, instruments.resources(lock.resources)));
    this.#ended(lock, heldMs);
  }

  /** Counts the extension attempt by outcome (`redlock.extensions`). */
  extensionEnded(lock: Lock, outcome: ExtensionOutcome): void {
    const instruments = this.#use();
    instruments.extensions.add(1, instruments.outcome(outcome, instruments.resources(lock.resources)));
  }

  /** Counts the failed request to one master (`redlock.master.errors`). */
  masterFailed(master: MasterAddress, failure: MasterFailure, operation: MasterOperation): void {
    const instruments = this.#use();
    instruments.masterErrors.add(1, instruments.master(master, failure, operation));
  }

  /** Counts the election won (`redlock.leadership.elections`) and reports its term (`redlock.leadership.term`). */
  leadershipWon(election: string, _identity: string, term: number): void {
    const instruments = this.#use();
    instruments.elections.add(1, instruments.election(election));
    instruments.terms.set(election, term);
  }

  /** Records how long it led (`redlock.leadership.duration`) and counts a loss (`redlock.leadership.losses`). */
  leadershipEnded(end: LeadershipEnd): void {
    const instruments = this.#use();
    if (instruments.terms.get(end.election) === end.term) instruments.terms.delete(end.election);
    instruments.leadershipDuration.record(seconds(end.heldMs), instruments.election(end.election, end.reason));
    if (end.reason === 'lost') instruments.leadershipLosses.add(1, instruments.election(end.election));
  }

  /** Starts the `@WithLock` call's span (`WithLock Class.method`) and timer. */
  callStarted(site: string): CallObserver {
    return new TracedCall(this.#use(), site);
  }

  /**
   * The engine reports each held lock's end once. The held time has no outcome attribute: the SDK
   * sorts and JSON-encodes a non-empty attribute set on every measurement, here on every release,
   * and lost locks are counted, with their reason, by `redlock.lost_locks`.
   */
  #ended(lock: Lock, heldMs: number): void {
    const instruments = this.#use();
    const resources = instruments.resources(lock.resources);
    instruments.lockDuration.record(seconds(heldMs), instruments.resourceSet(resources));
    instruments.locks.add(-1, resources);
  }

  /** Built at first use: the global providers are read once the app has had the chance to register its SDK. */
  #use(): RedlockInstruments {
    return (this.#instruments ??= new RedlockInstruments(
      this.#meterProvider ?? metrics.getMeterProvider(),
      this.#tracerProvider ?? trace.getTracerProvider(),
      this.#resourceAttributes,
    ));
  }
}
