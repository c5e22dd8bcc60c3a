import { SpanStatusCode, type Span } from '@opentelemetry/api';
import type { AcquireObserver, AcquireOutcome } from '../core/lock/instrumentation.js';
import type { RedlockInstruments } from './redlock-instruments.js';
import { errorType, seconds } from './telemetry-values.js';
import {
  ATTR_ERROR_TYPE,
  ATTR_REDLOCK_ACQUIRE_GRANTED,
  ATTR_REDLOCK_ACQUIRE_ROUNDS,
  ATTR_REDLOCK_OUTCOME,
} from './telemetry.constants.js';

/**
 * Outcomes that are failures of the acquire. `held` is the answer a caller that would not wait
 * asked for (tryAcquire, `onLocked: 'fail'` or `'skip'`), and `aborted` the caller's own doing.
 */
const FAILED: ReadonlySet<AcquireOutcome> = new Set(['timed_out', 'unreachable', 'error']);

/**
 * One acquire call's metrics and, when it has one, its span (started by RedlockTelemetry in the
 * caller's context, so a child of the caller's active span). Without a span or resource names
 * there is nothing of the call's own to keep: one instance then serves every call (the engine
 * passes the durations), and no object is made per acquire.
 */
export class TracedAcquire implements AcquireObserver {
  readonly #instruments: RedlockInstruments;
  readonly #resources: readonly string[] | undefined;
  readonly #span: Span | undefined;
  #rounds = 0;
  #granted = 0;

  constructor(instruments: RedlockInstruments, resources: readonly string[] | undefined, span: Span | undefined) {
    this.#instruments = instruments;
    this.#resources = resources;
    this.#span = span;
  }

  round(granted: number): void {
    if (!this.#span) return;
    this.#rounds++;
    this.#granted = granted;
  }

  handedOff(granted: number): void {
    if (this.#span) this.#granted = granted;
  }

  waiting(): void {
    this.#instruments.waiters.add(1, this.#resources);
  }

  ended(outcome: AcquireOutcome, error: unknown, durationMs: number, waitedMs: number | undefined): void {
    const instruments = this.#instruments;
    const attributes = instruments.outcome(outcome, this.#resources);
    instruments.acquireDuration.record(seconds(durationMs), attributes);
    if (waitedMs !== undefined) {
      instruments.waitDuration.record(seconds(waitedMs), attributes);
      instruments.waiters.add(-1, this.#resources);
    }
    const span = this.#span;
    if (!span) return;
    if (span.isRecording()) {
      span.setAttribute(ATTR_REDLOCK_OUTCOME, outcome);
      span.setAttribute(ATTR_REDLOCK_ACQUIRE_ROUNDS, this.#rounds);
      span.setAttribute(ATTR_REDLOCK_ACQUIRE_GRANTED, this.#granted);
      if (FAILED.has(outcome)) {
        // No message: the error's names the resources, which stay out unless asked for.
        span.setStatus({ code: SpanStatusCode.ERROR });
        span.setAttribute(ATTR_ERROR_TYPE, errorType(error));
      }
    }
    span.end();
  }
}
