import { once } from 'node:events';
import { metrics, SpanStatusCode, trace } from '@opentelemetry/api';
import type { HistogramMetricData } from '@opentelemetry/sdk-metrics';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockHeldError, LockLostError, QuorumUnreachableError, Redlock } from '../../lib/index.js';
import {
  HOLD_BUCKETS_S,
  LATENCY_BUCKETS_S,
  METRIC_ACQUIRE_DURATION,
  METRIC_EXTENSIONS,
  METRIC_LEADERSHIP_DURATION,
  METRIC_LEADERSHIP_ELECTIONS,
  METRIC_LEADERSHIP_LOSSES,
  METRIC_LEADERSHIP_TERM,
  METRIC_LOCK_COUNT,
  METRIC_LOCK_DURATION,
  METRIC_LOST_LOCKS,
  METRIC_MASTER_ERRORS,
  METRIC_WAIT_DURATION,
  METRIC_WAITER_COUNT,
  RedlockTelemetry,
  type RedlockTelemetryOptions,
} from '../../lib/opentelemetry/index.js';
import { connectMasters, disconnectAll, FRESH_FLEET, separateEngine } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { everythingExported, OtelSdk, points, total } from './otel-sdk.js';

// RedlockTelemetry on the real OpenTelemetry SDK (in-memory exporters) over 5 real masters:
// contention, a wait timeout, 3 of 5 masters down and lost locks each show up under the right
// names, units and attributes; resource names only when asked for.

let fleet: RedisFleet;
let sdk: OtelSdk | undefined;
const opened: Redis[] = [];
const proxies: TcpProxy[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(5);
});

afterEach(async () => {
  await sdk?.shutdown();
  sdk = undefined;
  disconnectAll(opened.splice(0));
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
  // Every test leaves all five masters up and empty for the next one.
  for (const node of fleet.nodes) {
    if (node.paused) fleet.resume(node.index);
    if (!node.running) await fleet.start(node.index);
  }
  const cleaners = await connectMasters(fleet.urls());
  await Promise.all(cleaners.map((client) => client.flushall()));
  disconnectAll(cleaners);
});

afterAll(async () => {
  await fleet?.stopAll();
});

function startSdk(): OtelSdk {
  sdk = new OtelSdk();
  return sdk;
}

/**
 * An engine of its own connections, reporting to `sdk`. Its acquires get spans without a parent
 * span too (these tests take locks outside any trace), unless `telemetry` says otherwise.
 */
async function tracedEngine(otel: OtelSdk, telemetry: RedlockTelemetryOptions = {}): Promise<Redlock> {
  const clients = await connectMasters(fleet.urls());
  opened.push(...clients);
  const instrumentation = new RedlockTelemetry({
    meterProvider: otel.meterProvider,
    tracerProvider: otel.tracerProvider,
    requireParentSpan: false,
    ...telemetry,
  });
  const redlock = new Redlock(clients, { ...FRESH_FLEET, instrumentation });
  await redlock.verifyMasters();
  return redlock;
}

async function otherEngine(): Promise<Redlock> {
  return (await separateEngine(fleet.urls(), opened)).redlock;
}

describe('RedlockTelemetry on the engine', () => {
  it('reports contention: the waiting call, its wait, the waiter count, and a held tryAcquire', async () => {
    const otel = startSdk();
    const traced = await tracedEngine(otel);
    const holder = await (await otherEngine()).acquire('contended', 10_000);

    expect(await traced.tryAcquire('contended', 10_000)).toBeNull();
    const waiting = traced.acquire('contended', 10_000, { waitTimeoutMs: 20_000 });
    await expect.poll(async () => total(await otel.metric(METRIC_WAITER_COUNT)), { timeout: 5_000 }).toBe(1);
    await holder.release();
    const lock = await waiting;
    expect(total(await otel.metric(METRIC_WAITER_COUNT))).toBe(0);
    expect(total(await otel.metric(METRIC_LOCK_COUNT))).toBe(1);
    await lock.release();

    const acquire = await otel.metric(METRIC_ACQUIRE_DURATION);
    expect(acquire?.descriptor.unit).toBe('s');
    expect(total(acquire, { 'redlock.outcome': 'held' })).toBe(1);
    expect(total(acquire, { 'redlock.outcome': 'acquired' })).toBe(1);
    // The bucket advice reached the SDK: sub-millisecond to a minute.
    expect((acquire as HistogramMetricData).dataPoints[0]!.value.buckets.boundaries).toEqual(LATENCY_BUCKETS_S);

    const wait = await otel.metric(METRIC_WAIT_DURATION);
    expect(wait?.descriptor.unit).toBe('s');
    expect(total(wait)).toBe(1);
    const [waited] = points(wait, { 'redlock.outcome': 'acquired' });
    expect((waited!.value as { sum: number }).sum).toBeGreaterThan(0);

    const waiters = await otel.metric(METRIC_WAITER_COUNT);
    expect(waiters?.descriptor.unit).toBe('{waiter}');
    const locks = await otel.metric(METRIC_LOCK_COUNT);
    expect(locks?.descriptor.unit).toBe('{lock}');
    expect(total(locks)).toBe(0);
    const held = await otel.metric(METRIC_LOCK_DURATION);
    expect(total(held)).toBe(1);
    // One series, no outcome: lost locks are counted, with their reason, by redlock.lost_locks.
    expect(points(held).map((point) => point.attributes)).toEqual([{}]);
    expect((held as HistogramMetricData).dataPoints[0]!.value.buckets.boundaries).toEqual(HOLD_BUCKETS_S);

    const spans = otel.spans('redlock.acquire');
    expect(spans).toHaveLength(2);
    // Held is the answer a caller that would not wait asked for: no error on the span.
    const refused = spans.find((span) => span.attributes['redlock.outcome'] === 'held')!;
    expect(refused.status.code).toBe(SpanStatusCode.UNSET);
    expect(refused.attributes).toMatchObject({ 'redlock.acquire.rounds': 1, 'redlock.acquire.granted': 0 });
    expect(refused.attributes['error.type']).toBeUndefined();
    const won = spans.find((span) => span.attributes['redlock.outcome'] === 'acquired')!;
    expect(won.status.code).toBe(SpanStatusCode.UNSET);
    // A round is decided once a quorum granted; stragglers answer after it.
    expect(won.attributes['redlock.acquire.granted']).toBeGreaterThanOrEqual(3);
    expect(won.attributes['redlock.acquire.rounds']).toBeGreaterThanOrEqual(2);
  });

  it('reports a wait that times out as timed_out, with its waiting time', async () => {
    const otel = startSdk();
    const traced = await tracedEngine(otel);
    const holder = await (await otherEngine()).acquire('slow', 10_000);
    await expect(traced.acquire('slow', 10_000, { waitTimeoutMs: 300 })).rejects.toBeInstanceOf(LockHeldError);
    await holder.release();

    expect(total(await otel.metric(METRIC_ACQUIRE_DURATION), { 'redlock.outcome': 'timed_out' })).toBe(1);
    const [waited] = points(await otel.metric(METRIC_WAIT_DURATION), { 'redlock.outcome': 'timed_out' });
    expect((waited!.value as { count: number }).count).toBe(1);
    expect(total(await otel.metric(METRIC_WAITER_COUNT))).toBe(0);
    expect(total(await otel.metric(METRIC_LOCK_COUNT))).toBe(0);
    const [span] = otel.spans('redlock.acquire');
    expect(span!.attributes).toMatchObject({ 'redlock.outcome': 'timed_out', 'error.type': 'LOCK_HELD' });
    expect(span!.status.code).toBe(SpanStatusCode.ERROR);
  });

  it('with 3 of 5 masters down, reports unreachable and each failing master by address and port', async () => {
    const otel = startSdk();
    const traced = await tracedEngine(otel);
    await Promise.all([fleet.kill(0), fleet.kill(1)]);
    fleet.pause(2);
    await expect(traced.acquire('outage', 10_000)).rejects.toBeInstanceOf(QuorumUnreachableError);

    expect(total(await otel.metric(METRIC_ACQUIRE_DURATION), { 'redlock.outcome': 'unreachable' })).toBe(1);
    const errors = await otel.metric(METRIC_MASTER_ERRORS);
    expect(errors?.descriptor.unit).toBe('{error}');
    const at = (index: number) => ({ 'server.address': '127.0.0.1', 'server.port': fleet.nodes[index]!.port });
    for (const index of [0, 1]) {
      expect(total(errors, { ...at(index), 'error.type': 'error', 'redlock.operation': 'acquire' })).toBeGreaterThanOrEqual(1);
      expect(total(errors, { ...at(index), 'error.type': 'timeout' })).toBe(0);
    }
    expect(total(errors, { ...at(2), 'error.type': 'timeout', 'redlock.operation': 'acquire' })).toBeGreaterThanOrEqual(1);
    expect(total(errors, { ...at(2), 'error.type': 'error' })).toBe(0);
    for (const index of [3, 4]) expect(points(errors, at(index))).toEqual([]);
    const [span] = otel.spans('redlock.acquire');
    expect(span!.attributes['redlock.outcome']).toBe('unreachable');
    expect(span!.attributes['error.type']).toBe('QUORUM_UNREACHABLE');
    expect(span!.attributes['redlock.acquire.granted']).toBeLessThanOrEqual(2);
  });

  it('counts a master that answers after the node timeout as a timeout, though the round was decided without it', async () => {
    const otel = startSdk();
    const slow = await TcpProxy.start({ host: '127.0.0.1', port: fleet.nodes[4]!.port });
    proxies.push(slow);
    const urls = fleet.urls().map((url, index) => (index === 4 ? slow.url : url));
    const clients = await connectMasters(urls);
    opened.push(...clients);
    const instrumentation = new RedlockTelemetry({ meterProvider: otel.meterProvider, tracerProvider: otel.tracerProvider });
    const traced = new Redlock(clients, { ...FRESH_FLEET, instrumentation, nodeTimeoutMs: 200 });
    await traced.verifyMasters();
    slow.setLatency(1_000);
    // Four fast masters decide the round; the fifth answers a second later, past the 200 ms timeout.
    const lock = await traced.acquire('lagging', 10_000);
    const late = { 'server.address': '127.0.0.1', 'server.port': slow.port, 'error.type': 'timeout', 'redlock.operation': 'acquire' };
    expect(total(await otel.metric(METRIC_MASTER_ERRORS), late)).toBe(0);
    await expect.poll(async () => total(await otel.metric(METRIC_MASTER_ERRORS), late), { timeout: 5_000 }).toBe(1);
    slow.setLatency(0);
    await lock.release();
  });

  it('counts a master that never answers a round decided without it as a timeout, at the deadline', async () => {
    const otel = startSdk();
    const clients = await connectMasters(fleet.urls());
    opened.push(...clients);
    const instrumentation = new RedlockTelemetry({ meterProvider: otel.meterProvider, tracerProvider: otel.tracerProvider });
    const traced = new Redlock(clients, { ...FRESH_FLEET, instrumentation, nodeTimeoutMs: 200 });
    await traced.verifyMasters();
    // SIGSTOP: the fifth master answers nothing while the test looks, so only the deadline can tell.
    fleet.pause(4);
    const lock = await traced.acquire('silent', 10_000);
    const silent = { 'server.address': '127.0.0.1', 'server.port': fleet.nodes[4]!.port, 'error.type': 'timeout', 'redlock.operation': 'acquire' };
    await expect.poll(async () => total(await otel.metric(METRIC_MASTER_ERRORS), silent), { timeout: 5_000 }).toBe(1);
    expect(lock.remainingMs()).toBeGreaterThan(0);
    fleet.resume(4);
    await lock.release();
  });

  it('reports an extension, then a lock lost to a refused extension, once, and its held time as lost', async () => {
    const otel = startSdk();
    const traced = await tracedEngine(otel);
    const lock = await traced.acquire('stolen', 10_000);
    await lock.extend();
    // Another owner's token where ours was, on every master: the next extension is refused.
    const admin = await connectMasters(fleet.urls());
    opened.push(...admin);
    await Promise.all(admin.map((client) => client.set('redlock:stolen', 'someone-else', 'PX', 10_000)));
    await expect(lock.extend()).rejects.toBeInstanceOf(LockLostError);
    await lock.release();

    const extensions = await otel.metric(METRIC_EXTENSIONS);
    expect(extensions?.descriptor.unit).toBe('{extension}');
    expect(total(extensions, { 'redlock.outcome': 'extended' })).toBe(1);
    expect(total(extensions, { 'redlock.outcome': 'lost' })).toBe(1);
    const lost = await otel.metric(METRIC_LOST_LOCKS);
    expect(lost?.descriptor.unit).toBe('{lock}');
    expect(total(lost)).toBe(1);
    expect(total(lost, { 'redlock.lost.reason': 'refused' })).toBe(1);
    // The lost lock's held time is recorded once: its release after the loss is not reported again.
    expect(total(await otel.metric(METRIC_LOCK_DURATION))).toBe(1);
    expect(total(await otel.metric(METRIC_LOCK_COUNT))).toBe(0);
  });

  it('reports leadership: elections won, the term led in, how long it led, and a loss apart from a resignation', async () => {
    const otel = startSdk();
    const traced = await tracedEngine(otel);
    const election = traced.election('reports', { leaseMs: 5_000 });
    const first = await election.campaign('pod-a');
    const term = await otel.metric(METRIC_LEADERSHIP_TERM);
    expect(points(term, { 'redlock.election': 'reports' }).map((point) => point.value)).toEqual([first.term]);
    await first.resign();
    const second = await election.campaign('pod-a');
    // Another owner's token where the lease was: its next renewal is refused, and it is lost.
    const admin = await connectMasters(fleet.urls());
    opened.push(...admin);
    await Promise.all(admin.map((client) => client.set('redlock:election:reports', 'someone-else', 'PX', 10_000)));
    await expect(second.signal.aborted ? Promise.resolve() : once(second.signal, 'abort')).resolves.toBeDefined();

    expect(total(await otel.metric(METRIC_LEADERSHIP_ELECTIONS), { 'redlock.election': 'reports' })).toBe(2);
    expect(total(await otel.metric(METRIC_LEADERSHIP_LOSSES), { 'redlock.election': 'reports' })).toBe(1);
    const duration = await otel.metric(METRIC_LEADERSHIP_DURATION);
    expect(duration?.descriptor.unit).toBe('s');
    expect(total(duration, { 'redlock.election': 'reports', 'redlock.leadership.end': 'resigned' })).toBe(1);
    expect(total(duration, { 'redlock.election': 'reports', 'redlock.leadership.end': 'lost' })).toBe(1);
  });

  it('reports a lock whose validity ran out as lost (expired), whether its signal was armed or not', async () => {
    const otel = startSdk();
    const traced = await tracedEngine(otel);
    const watched = await traced.acquire('short-watched', 200);
    await once(watched.signal, 'abort');
    const unwatched = await traced.acquire('short-unwatched', 200);
    // Nobody armed its signal (reading remainingMs does not): no event says when it runs out, and
    // the loss is seen when it is released after its validity.
    await expect.poll(() => unwatched.remainingMs(), { timeout: 5_000 }).toBe(0);
    await Promise.all([watched.release(), unwatched.release()]);

    expect(total(await otel.metric(METRIC_LOST_LOCKS), { 'redlock.lost.reason': 'expired' })).toBe(2);
    expect(total(await otel.metric(METRIC_LOCK_DURATION))).toBe(2);
    expect(total(await otel.metric(METRIC_LOCK_COUNT))).toBe(0);
  });

  it('keeps resource names out of every metric and span unless resourceAttributes is on', async () => {
    const otel = startSdk();
    const quiet = await tracedEngine(otel);
    await (await quiet.acquire('user:4711', 10_000)).release();
    expect(await quiet.tryAcquire('user:4711', 10_000)).not.toBeNull();
    expect(await everythingExported(otel)).not.toContain('4711');

    const named = await tracedEngine(otel, { resourceAttributes: true });
    const lock = await named.acquire(['user:4712', 'order:9'], 10_000);
    const resources = { 'redlock.resources': ['user:4712', 'order:9'] };
    expect(total(await otel.metric(METRIC_LOCK_COUNT), resources)).toBe(1);
    await lock.release();
    expect(total(await otel.metric(METRIC_ACQUIRE_DURATION), { ...resources, 'redlock.outcome': 'acquired' })).toBe(1);
    expect(points(await otel.metric(METRIC_LOCK_DURATION), resources).map((point) => point.attributes)).toEqual([resources]);
    const span = otel.spans('redlock.acquire').find((s) => s.attributes['redlock.resources'] !== undefined);
    expect(span?.attributes['redlock.resources']).toEqual(['user:4712', 'order:9']);
  });

  it('starts the acquire span in the caller\'s context: a child of the active span; none without one, by default', async () => {
    const otel = startSdk();
    const traced = await tracedEngine(otel, { requireParentSpan: true });
    // Outside any trace: metrics only, as OpenTelemetry's Redis instrumentations do by default.
    await (await traced.acquire('alone', 10_000)).release();
    expect(otel.spans()).toEqual([]);
    expect(total(await otel.metric(METRIC_ACQUIRE_DURATION), { 'redlock.outcome': 'acquired' })).toBe(1);
    // Contention without a span: one observer serves every such call, and waits still count.
    const holder = await (await otherEngine()).acquire('alone:contended', 10_000);
    const waiting = traced.acquire('alone:contended', 10_000, { waitTimeoutMs: 20_000 });
    await expect.poll(async () => total(await otel.metric(METRIC_WAITER_COUNT)), { timeout: 5_000 }).toBe(1);
    await holder.release();
    await (await waiting).release();
    expect(total(await otel.metric(METRIC_WAITER_COUNT))).toBe(0);
    expect(total(await otel.metric(METRIC_ACQUIRE_DURATION), { 'redlock.outcome': 'acquired' })).toBe(2);
    const [waited] = points(await otel.metric(METRIC_WAIT_DURATION), { 'redlock.outcome': 'acquired' });
    expect((waited!.value as { count: number; sum: number }).count).toBe(1);
    expect((waited!.value as { sum: number }).sum).toBeGreaterThan(0);
    expect(otel.spans()).toEqual([]);
    const tracer = otel.tracerProvider.getTracer('test');
    await tracer.startActiveSpan('caller', async (caller) => {
      // Through using(): the span still starts in the caller's context, before anything is sent.
      await traced.using('nested', 10_000, async () => {});
      caller.end();
    });
    const [caller] = otel.spans('caller');
    const [acquire] = otel.spans('redlock.acquire');
    expect(acquire!.spanContext().traceId).toBe(caller!.spanContext().traceId);
    expect(acquire!.parentSpanContext?.spanId).toBe(caller!.spanContext().spanId);
  });

  it('uses the global providers by default, read when the first lock is taken', async () => {
    const otel = startSdk();
    // Built before the SDK is registered, as in a module evaluated before main() starts the SDK.
    const instrumentation = new RedlockTelemetry();
    metrics.setGlobalMeterProvider(otel.meterProvider);
    trace.setGlobalTracerProvider(otel.tracerProvider);
    try {
      const clients = await connectMasters(fleet.urls());
      opened.push(...clients);
      const redlock = new Redlock(clients, { ...FRESH_FLEET, instrumentation });
      await redlock.verifyMasters();
      await trace.getTracer('test').startActiveSpan('caller', async (caller) => {
        await (await redlock.acquire('global', 10_000)).release();
        caller.end();
      });
      expect(total(await otel.metric(METRIC_ACQUIRE_DURATION), { 'redlock.outcome': 'acquired' })).toBe(1);
      expect(otel.spans('redlock.acquire')).toHaveLength(1);
    } finally {
      metrics.disable();
      trace.disable();
    }
  });
});

describe('the instrumentation option', () => {
  it('is checked: a class instead of an instance, an object without hooks, a hook that is not a function', () => {
    expect(() => new Redlock([], { instrumentation: RedlockTelemetry as never })).toThrow(/invalid instrumentation: .*expected an object with hook methods/);
    expect(() => new Redlock([], { instrumentation: {} })).toThrow(/invalid instrumentation/);
    expect(() => new Redlock([], { instrumentation: { lockHeld: 'yes' } as never })).toThrow(/invalid instrumentation\.lockHeld: "yes" \(expected a function\)/);
    expect(() => new RedlockTelemetry({ resourceAttributes: 'yes' as never })).toThrow(/invalid resourceAttributes/);
    expect(() => new RedlockTelemetry({ meterProvider: {} as never })).toThrow(/invalid meterProvider/);
    expect(() => new RedlockTelemetry({ requireParentSpan: 1 as never })).toThrow(/invalid requireParentSpan/);
  });

  it("tells an acquire observer the call's duration and its wait, as the engine measured them", async () => {
    const ended: { outcome: string; durationMs: number; waitedMs: number | undefined; rounds: number[] }[] = [];
    let sawWaiting!: () => void;
    const waits = new Promise<void>((resolve) => (sawWaiting = resolve));
    const clients = await connectMasters(fleet.urls());
    opened.push(...clients);
    const redlock = new Redlock(clients, {
      ...FRESH_FLEET,
      instrumentation: {
        acquireStarted: () => {
          const rounds: number[] = [];
          return {
            waiting: () => sawWaiting(),
            round: (_granted, roundMs) => void rounds.push(roundMs),
            ended: (outcome, _error, durationMs, waitedMs) => void ended.push({ outcome, durationMs, waitedMs, rounds }),
          };
        },
      },
    });
    await redlock.verifyMasters();
    await (await redlock.acquire('timed', 10_000)).release();
    const holder = await (await otherEngine()).acquire('timed', 10_000);
    expect(await redlock.tryAcquire('timed', 10_000)).toBeNull();
    const waiting = redlock.acquire('timed', 10_000, { waitTimeoutMs: 20_000 });
    await waits;
    await holder.release();
    await (await waiting).release();

    expect(ended.map((call) => call.outcome)).toEqual(['acquired', 'held', 'acquired']);
    const [alone, refused, waited] = ended;
    for (const call of ended) expect(call.durationMs).toBeGreaterThan(0);
    expect(alone!.waitedMs).toBeUndefined();
    expect(refused!.waitedMs).toBeUndefined();
    expect(waited!.waitedMs).toBeGreaterThan(0);
    expect(waited!.waitedMs).toBeLessThanOrEqual(waited!.durationMs);
    // Each round's own span, inside its call's: a lone acquire and a refused try are one round each.
    expect(alone!.rounds).toHaveLength(1);
    expect(refused!.rounds).toHaveLength(1);
    for (const call of ended) {
      expect(call.rounds.length).toBeGreaterThan(0);
      for (const roundMs of call.rounds) expect(roundMs).toBeGreaterThan(0);
      expect(call.rounds.reduce((sum, roundMs) => sum + roundMs, 0)).toBeLessThanOrEqual(call.durationMs);
    }
  });

  it('survives a hook that throws: locks work, the failure is logged once', async () => {
    const warnings: string[] = [];
    const clients = await connectMasters(fleet.urls());
    opened.push(...clients);
    const redlock = new Redlock(clients, {
      ...FRESH_FLEET,
      logger: { warn: (message) => warnings.push(message) },
      instrumentation: {
        lockHeld: () => {
          throw new Error('exporter down at redis://user:secret@metrics:1');
        },
        acquireStarted: () => ({
          ended: () => {
            throw new Error('observer broken');
          },
        }),
      },
    });
    await redlock.verifyMasters();
    for (let i = 0; i < 3; i++) await (await redlock.acquire('guarded', 10_000)).release();
    expect(await redlock.tryAcquire('guarded', 10_000)).not.toBeNull();
    expect(warnings.filter((w) => w.includes('lockHeld'))).toHaveLength(1);
    expect(warnings.filter((w) => w.includes('AcquireObserver.ended'))).toHaveLength(1);
    expect(warnings.join('\n')).not.toContain('secret');
  });
});
