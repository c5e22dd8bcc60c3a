import { context, metrics, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider, PeriodicExportingMetricReader, type PushMetricExporter } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';

/** An exporter that accepts and drops everything: what is measured is recording, not the wire. */
const discard = {
  export: (_items: unknown, done: (result: { code: 0 }) => void) => done({ code: 0 }),
  shutdown: async () => {},
  forceFlush: async () => {},
};

/**
 * The OpenTelemetry SDK as an app installs it (what NodeSDK registers): global MeterProvider
 * and TracerProvider, every span sampled (the default ParentBased(AlwaysOn)) and batched, metrics
 * collected every second, and the AsyncLocalStorage context manager. The exporters drop what
 * they receive: the cost of a real exporter's encoding and network is the SDK's, whatever
 * library produced the data. The span queue is large enough that no span is dropped for want of
 * room (a full queue would drop spans and flatter the figures).
 *
 * The context manager is put to use once, as HTTP instrumentation does on every request and the
 * SDK's own exports do: from then on Node 20 tracks every promise for AsyncLocalStorage, a cost
 * every async line of the app pays, whatever reports telemetry.
 */
export interface InstalledOtelSdk {
  uninstall(): Promise<void>;
  /** Hands every queued span to the exporter now, rather than at the processor's next tick. */
  flushSpans(): Promise<void>;
}

export function installOtelSdk(): InstalledOtelSdk {
  const meterProvider = new MeterProvider({
    readers: [new PeriodicExportingMetricReader({ exporter: discard as unknown as PushMetricExporter, exportIntervalMillis: 1_000 })],
  });
  const spanProcessor = new BatchSpanProcessor(discard as unknown as SpanExporter, {
    maxQueueSize: 262_144,
    maxExportBatchSize: 8_192,
    scheduledDelayMillis: 500,
  });
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [spanProcessor] });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  metrics.setGlobalMeterProvider(meterProvider);
  trace.setGlobalTracerProvider(tracerProvider);
  context.with(ROOT_CONTEXT, () => {});
  return {
    uninstall: async () => {
      await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()]);
      metrics.disable();
      trace.disable();
      context.disable();
    },
    flushSpans: () => tracerProvider.forceFlush(),
  };
}
