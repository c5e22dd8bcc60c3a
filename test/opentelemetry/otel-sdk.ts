import { context, type Attributes, type AttributeValue } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AggregationTemporality,
  DataPointType,
  type DataPoint,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';

/**
 * The real OpenTelemetry SDK with in-memory exporters, as an app would install it: a
 * MeterProvider whose reader exports on demand, a BasicTracerProvider that records every span,
 * and the AsyncLocalStorage context manager (what NodeSDK registers) so parents and children
 * follow async calls.
 */
export class OtelSdk {
  readonly metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  // An interval no test waits for: metrics are exported by collect(), on demand.
  readonly reader = new PeriodicExportingMetricReader({ exporter: this.metricExporter, exportIntervalMillis: 3_600_000 });
  readonly meterProvider = new MeterProvider({ readers: [this.reader] });
  readonly spanExporter = new InMemorySpanExporter();
  readonly tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(this.spanExporter)] });
  readonly #contextManager = new AsyncLocalStorageContextManager();

  constructor() {
    context.setGlobalContextManager(this.#contextManager.enable());
  }

  /** Every metric as of now (cumulative since the start). */
  async collect(): Promise<MetricData[]> {
    this.metricExporter.reset();
    await this.reader.forceFlush();
    return this.metricExporter.getMetrics().flatMap((resource) => resource.scopeMetrics.flatMap((scope) => scope.metrics));
  }

  /** The metric named `name`, or undefined when nothing was recorded under it. */
  async metric(name: string): Promise<MetricData | undefined> {
    return (await this.collect()).find((metric) => metric.descriptor.name === name);
  }

  spans(name?: string): ReadableSpan[] {
    const all = this.spanExporter.getFinishedSpans();
    return name === undefined ? all : all.filter((span) => span.name === name);
  }

  async shutdown(): Promise<void> {
    await Promise.all([this.meterProvider.shutdown(), this.tracerProvider.shutdown()]);
    context.disable();
  }
}

/** A data point's value as a number: a counter's sum, a histogram's count. */
export function pointValue(metric: MetricData, point: DataPoint<unknown>): number {
  if (metric.dataPointType === DataPointType.HISTOGRAM) return (point.value as { count: number }).count;
  return point.value as number;
}

/** The metric's points whose attributes include `match`, summed (histograms: how many recorded). */
export function total(metric: MetricData | undefined, match: Attributes = {}): number {
  if (!metric) return 0;
  return (metric.dataPoints as DataPoint<unknown>[])
    .filter((point) => matches(point.attributes, match))
    .reduce((sum, point) => sum + pointValue(metric, point), 0);
}

/** The metric's points whose attributes include `match`. */
export function points(metric: MetricData | undefined, match: Attributes = {}): DataPoint<unknown>[] {
  if (!metric) return [];
  return (metric.dataPoints as DataPoint<unknown>[]).filter((point) => matches(point.attributes, match));
}

function matches(attributes: Attributes, match: Attributes): boolean {
  return Object.entries(match).every(([key, value]) => same(attributes[key], value));
}

function same(a: AttributeValue | undefined, b: AttributeValue | undefined): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Every attribute value of every exported point and span, as text: for "this name never appears". */
export async function everythingExported(sdk: OtelSdk): Promise<string> {
  const metrics = await sdk.collect();
  const spans = sdk.spans().map((span) => ({ name: span.name, attributes: span.attributes, status: span.status, events: span.events }));
  return JSON.stringify({ metrics: metrics.map((m) => m.dataPoints.map((p) => p.attributes)), spans });
}
