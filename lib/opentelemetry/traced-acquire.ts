import { context, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import type { AcquireObserver, AcquireOutcome } from '../core/instrumentation.js';
import type { RedlockInstruments } from './redlock-instruments.js';
import { errorType, seconds } from './telemetry-values.js';
import {
  ATTR_ERROR_TYPE,
  ATTR_REDLOCK_ACQUIRE_GRANTED,
  ATTR_REDLOCK_ACQUIRE_ROUNDS,
  ATTR_REDLOCK_OUTCOME,
  SPAN_ACQUIRE,
} from './telemetry.constants.js';

/**
 * Outcomes that are failures of the acquire. `held` is the answer a caller that would not wait
 * asked for (tryAcquire, `onLocked: 'fail'` or `'skip'`), and `aborted` the caller's own doing.
 */
const FAILED: ReadonlySet<AcquireOutcome> = new Set(['timed_out', 'unreachable', 'error']);

/**
 * One acquire call: its span (started in the caller's context, so a child of the caller's
 * active span; none without one when a parent is required), its duration, and its waiting.
 */
export class TracedAcquire implements AcquireObserver {
  readonly #instruments: RedlockInstruments;
  readonly #span: Span | undefined;
  readonly #resources: readonly string[] | undefined;
  readonly #start = performance.now();
  #rounds = 0;
  #granted = 0;
  #waitingSince = -1;

  constructor(instruments: RedlockInstruments, resources: readonly string[], requireParentSpan: boolean) {
    this.#instruments = instruments;
    this.#resources = instruments.resources(resources);
    if (!requireParentSpan || trace.getSpan(context.active())) {
      this.#span = instruments.tracer.startSpan(SPAN_ACQUIRE, instruments.spanOptions(this.#resources));
    }
  }

  round(granted: number): void {
    this.#rounds++;
    this.#granted = granted;
  }

  handedOff(granted: number): void {
    this.#granted = granted;
  }

  waiting(): void {
    this.#waitingSince = performance.now();
    this.#instruments.waiters.add(1, this.#resources);
  }

  ended(outcome: AcquireOutcome, error: unknown): void {
    const end = performance.now();
    const instruments = this.#instruments;
    const attributes = instruments.outcome(outcome, this.#resources);
    instruments.acquireDuration.record(seconds(end - this.#start), attributes);
    if (this.#waitingSince >= 0) {
      instruments.waitDuration.record(seconds(end - this.#waitingSince), attributes);
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
