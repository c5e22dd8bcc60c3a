import { SpanKind, type Attributes, type Counter, type Histogram, type MeterProvider, type SpanOptions, type Tracer, type TracerProvider } from '@opentelemetry/api';
import type { MasterAddress, MasterFailure, MasterOperation } from '../core/lock/instrumentation.js';
import { LiveCount } from './live-count.js';
import {
  ATTR_CODE_FUNCTION_NAME,
  ATTR_ERROR_TYPE,
  ATTR_REDLOCK_LOST_REASON,
  ATTR_REDLOCK_OPERATION,
  ATTR_REDLOCK_OUTCOME,
  ATTR_REDLOCK_RESOURCES,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  HOLD_BUCKETS_S,
  INSTRUMENTATION_SCOPE,
  LATENCY_BUCKETS_S,
  METRIC_ACQUIRE_DURATION,
  METRIC_CALL_DURATION,
  METRIC_EXTENSIONS,
  METRIC_LOCK_COUNT,
  METRIC_LOCK_DURATION,
  METRIC_LOST_LOCKS,
  METRIC_MASTER_ERRORS,
  METRIC_WAIT_DURATION,
  METRIC_WAITER_COUNT,
  METRIC_LEADERSHIP_ELECTIONS,
  METRIC_LEADERSHIP_LOSSES,
  METRIC_LEADERSHIP_DURATION,
  METRIC_LEADERSHIP_TERM,
  ATTR_REDLOCK_ELECTION,
  ATTR_REDLOCK_LEADERSHIP_END,
} from './telemetry.constants.js';

const INTERNAL_SPAN: SpanOptions = Object.freeze({ kind: SpanKind.INTERNAL });
const NO_ATTRIBUTES: Attributes = Object.freeze({});

/**
 * The meter's instruments, the tracer, and the attribute sets they are given. Attribute sets
 * without resource names are built once and reused: the SDK keys its series by them on every
 * measurement, and a fresh object per call would be garbage on the lock's hot path.
 */
export class RedlockInstruments {
  readonly tracer: Tracer;
  readonly acquireDuration: Histogram;
  readonly waitDuration: Histogram;
  readonly lockDuration: Histogram;
  readonly lostLocks: Counter;
  readonly extensions: Counter;
  readonly masterErrors: Counter;
  readonly callDuration: Histogram;
  readonly locks: LiveCount;
  readonly waiters: LiveCount;
  readonly elections: Counter;
  readonly leadershipLosses: Counter;
  readonly leadershipDuration: Histogram;
  /** Per election this process leads now, its term. */
  readonly terms = new Map<string, number>();
  /** Resource names go into attributes. */
  readonly perResource: boolean;
  readonly #outcomes = new Map<string, Attributes>();
  readonly #reasons = new Map<string, Attributes>();
  readonly #masters = new Map<string, Attributes>();
  readonly #calls = new Map<string, Map<string, Attributes>>();

  constructor(meterProvider: MeterProvider, tracerProvider: TracerProvider, perResource: boolean) {
    this.perResource = perResource;
    this.tracer = tracerProvider.getTracer(INSTRUMENTATION_SCOPE);
    const meter = meterProvider.getMeter(INSTRUMENTATION_SCOPE);
    const latency = { unit: 's', advice: { explicitBucketBoundaries: LATENCY_BUCKETS_S } };
    const hold = { unit: 's', advice: { explicitBucketBoundaries: HOLD_BUCKETS_S } };
    this.acquireDuration = meter.createHistogram(METRIC_ACQUIRE_DURATION, {
      ...latency,
      description: 'Duration of lock acquire calls, from the call to the lock or the error.',
    });
    this.waitDuration = meter.createHistogram(METRIC_WAIT_DURATION, {
      ...latency,
      description: 'Time acquire calls spent waiting for a lock held elsewhere or for masters in restart quarantine.',
    });
    this.lockDuration = meter.createHistogram(METRIC_LOCK_DURATION, {
      ...hold,
      description: 'How long locks were held, from acquired to released or lost.',
    });
    this.callDuration = meter.createHistogram(METRIC_CALL_DURATION, {
      ...hold,
      description: 'Duration of @WithLock calls, taking the lock and running the method.',
    });
    this.lostLocks = meter.createCounter(METRIC_LOST_LOCKS, { unit: '{lock}', description: 'Held locks that were lost.' });
    this.extensions = meter.createCounter(METRIC_EXTENSIONS, { unit: '{extension}', description: 'Lock extension attempts.' });
    this.masterErrors = meter.createCounter(METRIC_MASTER_ERRORS, {
      unit: '{error}',
      description: 'Requests to a Redis master that failed or had no answer within the node timeout.',
    });
    this.elections = meter.createCounter(METRIC_LEADERSHIP_ELECTIONS, { unit: '{election}', description: 'Elections this process won.' });
    this.leadershipLosses = meter.createCounter(METRIC_LEADERSHIP_LOSSES, {
      unit: '{election}',
      description: 'Leaderships of this process that were lost (renewal failed, or the lease ran out), not resigned.',
    });
    this.leadershipDuration = meter.createHistogram(METRIC_LEADERSHIP_DURATION, {
      ...hold,
      description: 'How long this process led an election, from won to resigned or lost.',
    });
    meter
      .createObservableGauge(METRIC_LEADERSHIP_TERM, { unit: '{term}', description: 'The term this process leads an election in now.' })
      .addCallback((result) => {
        for (const [election, term] of this.terms) result.observe(term, { [ATTR_REDLOCK_ELECTION]: election });
      });
    this.locks = new LiveCount(perResource);
    this.waiters = new LiveCount(perResource);
    meter
      .createObservableUpDownCounter(METRIC_LOCK_COUNT, { unit: '{lock}', description: 'Locks this process holds now.' })
      .addCallback((result) => this.locks.observe(result));
    meter
      .createObservableUpDownCounter(METRIC_WAITER_COUNT, { unit: '{waiter}', description: 'Acquire calls of this process waiting now.' })
      .addCallback((result) => this.waiters.observe(result));
  }

  /** The resource names to report for a lock or call, when they are reported at all. */
  resources(resources: readonly string[]): readonly string[] | undefined {
    return this.perResource ? resources : undefined;
  }

  spanOptions(resources: readonly string[] | undefined): SpanOptions {
    return resources ? { kind: SpanKind.INTERNAL, attributes: this.resourceSet(resources) } : INTERNAL_SPAN;
  }

  /** No attributes, or only the resource names when they are reported. */
  resourceSet(resources: readonly string[] | undefined): Attributes {
    return resources ? { [ATTR_REDLOCK_RESOURCES]: [...resources] } : NO_ATTRIBUTES;
  }

  /** `{ redlock.outcome }`, with the resource names when reported. */
  outcome(outcome: string, resources: readonly string[] | undefined): Attributes {
    if (resources) return { [ATTR_REDLOCK_OUTCOME]: outcome, ...this.resourceSet(resources) };
    return this.#outcomes.get(outcome) ?? remember(this.#outcomes, outcome, { [ATTR_REDLOCK_OUTCOME]: outcome });
  }

  lostReason(reason: string, resources: readonly string[] | undefined): Attributes {
    if (resources) return { [ATTR_REDLOCK_LOST_REASON]: reason, ...this.resourceSet(resources) };
    return this.#reasons.get(reason) ?? remember(this.#reasons, reason, { [ATTR_REDLOCK_LOST_REASON]: reason });
  }

  /** Rare (a failing master), so one map keyed by a composed string is enough. */
  master(master: MasterAddress, failure: MasterFailure, operation: MasterOperation): Attributes {
    const key = `${master.name}\n${failure}\n${operation}`;
    return (
      this.#masters.get(key) ??
      remember(this.#masters, key, {
        [ATTR_SERVER_ADDRESS]: master.address,
        ...(master.port === undefined ? {} : { [ATTR_SERVER_PORT]: master.port }),
        [ATTR_ERROR_TYPE]: failure,
        [ATTR_REDLOCK_OPERATION]: operation,
      })
    );
  }

  election(election: string, end?: string): Attributes {
    return end === undefined ? { [ATTR_REDLOCK_ELECTION]: election } : { [ATTR_REDLOCK_ELECTION]: election, [ATTR_REDLOCK_LEADERSHIP_END]: end };
  }

  call(site: string, outcome: string): Attributes {
    let bySite = this.#calls.get(site);
    if (!bySite) {
      bySite = new Map();
      this.#calls.set(site, bySite);
    }
    return bySite.get(outcome) ?? remember(bySite, outcome, { [ATTR_CODE_FUNCTION_NAME]: site, [ATTR_REDLOCK_OUTCOME]: outcome });
  }
}

/** Caches are bounded: outcomes, reasons, masters and decorated methods are few and fixed. */
function remember(cache: Map<string, Attributes>, key: string, attributes: Attributes): Attributes {
  Object.freeze(attributes);
  cache.set(key, attributes);
  return attributes;
}
