import { context, SpanKind, SpanStatusCode, trace, type Context, type Span } from '@opentelemetry/api';
import type { CallObserver, CallOutcome } from '../core/lock/instrumentation.js';
import type { RedlockInstruments } from './redlock-instruments.js';
import { errorType, seconds } from './telemetry-values.js';
import { ATTR_CODE_FUNCTION_NAME, ATTR_ERROR_TYPE, ATTR_REDLOCK_OUTCOME, SPAN_CALL_PREFIX } from './telemetry.constants.js';

/**
 * One `@WithLock` call: a span named after the method, a child of the caller's active span and
 * the parent of what the call does (its acquire span, and the method's own spans).
 */
export class TracedCall implements CallObserver {
  readonly #instruments: RedlockInstruments;
  readonly #site: string;
  readonly #span: Span;
  readonly #context: Context;
  readonly #start = performance.now();

  constructor(instruments: RedlockInstruments, site: string) {
    this.#instruments = instruments;
    this.#site = site;
    this.#span = instruments.tracer.startSpan(SPAN_CALL_PREFIX + site, {
      kind: SpanKind.INTERNAL,
      attributes: { [ATTR_CODE_FUNCTION_NAME]: site },
    });
    this.#context = trace.setSpan(context.active(), this.#span);
  }

  run<T>(work: () => T): T {
    return context.with(this.#context, work);
  }

  ended(outcome: CallOutcome, error: unknown): void {
    this.#instruments.callDuration.record(seconds(performance.now() - this.#start), this.#instruments.call(this.#site, outcome));
    const span = this.#span;
    if (span.isRecording()) {
      span.setAttribute(ATTR_REDLOCK_OUTCOME, outcome);
      if (outcome === 'threw' || outcome === 'not_locked') {
        span.setStatus({ code: SpanStatusCode.ERROR });
        span.setAttribute(ATTR_ERROR_TYPE, errorType(error));
      }
    }
    span.end();
  }
}
