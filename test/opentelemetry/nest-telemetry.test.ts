import 'reflect-metadata';
import { Controller, Injectable, Module, Param, Post, type MiddlewareConsumer, type NestMiddleware, type NestModule } from '@nestjs/common';
import { context, SpanStatusCode, trace } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedlockModule, WithLock } from '../../lib/index.js';
import { METRIC_ACQUIRE_DURATION, METRIC_CALL_DURATION, RedlockTelemetry } from '../../lib/opentelemetry/index.js';
import { closeAll, createApp, deferred, fleetOptions, urlOf, type Deferred } from '../nest/nest-helpers.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { OtelSdk, total } from './otel-sdk.js';

// A Nest app with RedlockModule.forRoot({ instrumentation: new RedlockTelemetry() }) on the real
// OpenTelemetry SDK: every @WithLock call gets a span named after its method, the child of the
// caller's active span and the parent of its acquire span; its duration and outcome are counted.

let fleet: RedisFleet;
let sdk: OtelSdk;

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterEach(async () => {
  await closeAll();
  await sdk?.shutdown();
});

afterAll(async () => {
  await fleet?.stopAll();
});

const gates: { entered: Deferred; release: Deferred } = { entered: deferred(), release: deferred() };

/** Stands for HTTP instrumentation: each request runs under a span of its own. */
class RequestSpanMiddleware implements NestMiddleware {
  use(_req: unknown, res: { on(event: 'finish', listener: () => void): void }, next: () => void): void {
    const span = sdk.tracerProvider.getTracer('test').startSpan('request');
    res.on('finish', () => span.end());
    context.with(trace.setSpan(context.active(), span), next);
  }
}

@Injectable()
class InvoiceService {
  @WithLock('invoice:{0}')
  async issue(id: string) {
    return { id };
  }

  @WithLock('invoice:{0}')
  async reject(_id: string): Promise<never> {
    throw new Error('card declined');
  }
}

@Controller('orders')
class OrdersController {
  @Post(':id/pay')
  @WithLock('order:{0}', { onLocked: 'fail' })
  async pay(@Param('id') id: string) {
    gates.entered.resolve();
    await gates.release.promise;
    return { id, paid: true };
  }
}

async function telemetryApp() {
  sdk = new OtelSdk();
  const instrumentation = new RedlockTelemetry({ meterProvider: sdk.meterProvider, tracerProvider: sdk.tracerProvider });

  @Module({
    imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), instrumentation })],
    controllers: [OrdersController],
    providers: [InvoiceService],
  })
  class AppModule implements NestModule {
    configure(consumer: MiddlewareConsumer) {
      consumer.apply(RequestSpanMiddleware).forRoutes('*');
    }
  }

  const app = await createApp({ imports: [AppModule] }, { listen: true });
  return { app, invoices: app.get(InvoiceService) };
}

const childrenOf = (parent: ReadableSpan, spans: readonly ReadableSpan[]) =>
  spans.filter((span) => span.parentSpanContext?.spanId === parent.spanContext().spanId);

describe('RedlockTelemetry in a Nest app', () => {
  it('gives a decorated route call its span: child of the request span, parent of the acquire span', async () => {
    const { app } = await telemetryApp();
    gates.entered = deferred();
    gates.release = deferred();
    const first = request(urlOf(app)).post('/orders/42/pay').then((response) => response);
    await gates.entered.promise;
    // Held by the first call: this one is refused (409), and says why.
    await request(urlOf(app)).post('/orders/42/pay').expect(409);
    gates.release.resolve();
    expect((await first).status).toBe(201);

    const spans = sdk.spans();
    const requests = spans.filter((span) => span.name === 'request');
    expect(requests).toHaveLength(2);
    const calls = spans.filter((span) => span.name === 'WithLock OrdersController.pay');
    expect(calls).toHaveLength(2);
    for (const call of calls) {
      expect(call.attributes['code.function.name']).toBe('OrdersController.pay');
      const [parent] = requests.filter((r) => r.spanContext().spanId === call.parentSpanContext?.spanId);
      expect(parent).toBeDefined();
      const [acquire] = childrenOf(call, spans);
      expect(acquire?.name).toBe('redlock.acquire');
      expect(acquire!.spanContext().traceId).toBe(parent!.spanContext().traceId);
    }
    const ran = calls.find((call) => call.attributes['redlock.outcome'] === 'ran')!;
    expect(ran.status.code).toBe(SpanStatusCode.UNSET);
    expect(childrenOf(ran, spans)[0]!.attributes['redlock.outcome']).toBe('acquired');
    const refused = calls.find((call) => call.attributes['redlock.outcome'] === 'not_locked')!;
    expect(refused.status.code).toBe(SpanStatusCode.ERROR);
    expect(refused.attributes['error.type']).toBe('LOCK_HELD');
    expect(childrenOf(refused, spans)[0]!.attributes['redlock.outcome']).toBe('held');

    const durations = await sdk.metric(METRIC_CALL_DURATION);
    expect(durations?.descriptor.unit).toBe('s');
    const site = { 'code.function.name': 'OrdersController.pay' };
    expect(total(durations, { ...site, 'redlock.outcome': 'ran' })).toBe(1);
    expect(total(durations, { ...site, 'redlock.outcome': 'not_locked' })).toBe(1);
    // The resource names ('order:42') stay out by default.
    expect(JSON.stringify(spans.map((span) => span.attributes))).not.toContain('42');
  });

  it('gives a decorated provider method its span under the caller\'s, and tells a throw from a lock failure', async () => {
    const { invoices } = await telemetryApp();
    const tracer = sdk.tracerProvider.getTracer('test');
    await tracer.startActiveSpan('job', async (job) => {
      await invoices.issue('7');
      await expect(invoices.reject('8')).rejects.toThrow('card declined');
      job.end();
    });

    const spans = sdk.spans();
    const [job] = spans.filter((span) => span.name === 'job');
    const calls = childrenOf(job!, spans);
    expect(calls.map((call) => [call.name, call.attributes['redlock.outcome']]).sort()).toEqual([
      ['WithLock InvoiceService.issue', 'ran'],
      ['WithLock InvoiceService.reject', 'threw'],
    ]);
    for (const call of calls) expect(childrenOf(call, spans).map((span) => span.name)).toEqual(['redlock.acquire']);
    const threw = calls.find((call) => call.attributes['redlock.outcome'] === 'threw')!;
    expect(threw.status.code).toBe(SpanStatusCode.ERROR);
    expect(threw.attributes['error.type']).toBe('Error');
    // The lock itself was had both times.
    expect(total(await sdk.metric(METRIC_ACQUIRE_DURATION), { 'redlock.outcome': 'acquired' })).toBe(2);
    expect(total(await sdk.metric(METRIC_CALL_DURATION), { 'code.function.name': 'InvoiceService.reject', 'redlock.outcome': 'threw' })).toBe(1);
  });
});
