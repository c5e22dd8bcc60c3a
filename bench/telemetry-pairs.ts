import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { Redlock, type Lock } from '../lib/core/index.js';
import { InstrumentationGuard } from '../lib/core/lock/instrumentation-guard.js';
import { metrics } from '@opentelemetry/api';
import type { AcquireObserver, RedlockInstrumentation } from '../lib/core/lock/instrumentation.js';
import { RedlockTelemetry, type RedlockTelemetryOptions } from '../lib/opentelemetry/index.js';
import { HOLD_BUCKETS_S, LATENCY_BUCKETS_S } from '../lib/opentelemetry/telemetry.constants.js';
import { WAIT_MS } from './adapters/lock-adapter.js';
import { connect, disconnect } from './support/clients.js';
import { reportAndExit } from './support/ipc.js';
import { installOtelSdk } from './support/otel-sdk.js';
import { ascending, percentile } from './support/stats.js';

/**
 * One process, the OpenTelemetry SDK installed, and one engine per way of reporting: none,
 * `RedlockTelemetry()`, `RedlockTelemetry({ requireParentSpan: false })` and the SDK floor. They
 * take turns in short blocks of scenario 1 (one caller) and scenario 2 (200 callers), so a machine
 * that slows down for a while slows all of them alike, and each turn cleans up after itself
 * (`settle`), so none pays for another: the difference left is what the telemetry costs.
 */
export interface PairsJob {
  urls: string[];
  /** Turns per way, per scenario. */
  blocks: number;
  /** Scenario 1: sequential cycles per turn, after `warmup` per way. */
  cycles: number;
  warmup: number;
  /** Scenario 2: length of a turn. */
  blockMs: number;
  callers: number;
  ttlMs: number;
}

/**
 * `floor`: not our telemetry, but the least any OpenTelemetry reporting of these metrics costs
 * the SDK: per cycle the two histogram records (the acquire's duration with its outcome
 * attribute, the lock's held time without attributes) of the durations the engine passes to its
 * hooks, through one observer shared by every call, nothing else.
 */
export const WAYS = ['off', 'telemetry', 'spans', 'floor'] as const;
export type Way = (typeof WAYS)[number];

function instrumentation(way: Way): RedlockInstrumentation | undefined {
  if (way === 'off') return undefined;
  if (way === 'floor') return sdkFloor();
  const options: RedlockTelemetryOptions = way === 'spans' ? { requireParentSpan: false } : {};
  return new RedlockTelemetry(options);
}

function sdkFloor(): RedlockInstrumentation {
  const meter = metrics.getMeter('bench-sdk-floor');
  const acquire = meter.createHistogram('bench.acquire.duration', { unit: 's', advice: { explicitBucketBoundaries: LATENCY_BUCKETS_S } });
  const held = meter.createHistogram('bench.lock.duration', { unit: 's', advice: { explicitBucketBoundaries: HOLD_BUCKETS_S } });
  const acquired = Object.freeze({ 'redlock.outcome': 'acquired' });
  const none = Object.freeze({});
  const observer: AcquireObserver = { ended: (_outcome, _error, durationMs) => acquire.record(durationMs / 1000, acquired) };
  return {
    acquireStarted: () => observer,
    lockReleased: (_lock, heldMs) => held.record(heldMs / 1000, none),
  };
}

/**
 * Per way: scenario 1's p50s over all measured cycles, scenario 2's cycles/s per turn and failed
 * acquires, and for each the process's CPU time per cycle (µs): what the telemetry costs in CPU,
 * which other processes on the machine disturb far less than wall time. The `…Turns` arrays hold
 * one figure per turn, in block order, so a way's turn can be set against telemetry off's turn
 * of the same block, taken seconds apart.
 */
export type PairsResult = Record<
  Way,
  {
    cycleP50: number;
    acquireP50: number;
    singleCpuUs: number;
    cycleP50Turns: number[];
    acquireP50Turns: number[];
    singleCpuTurns: number[];
    pipelined: number[];
    pipelinedCpuUs: number;
    pipelinedCpuTurns: number[];
    plain: number[];
    plainCpuUs: number;
    plainCpuTurns: number[];
    errors: number;
    /** CPU per cycle of the hooks alone: what the engine calls for one acquire and release, without Redis. */
    hooksCpuUs: number;
  }
>;

/** CPU time this process spent (user and system, every thread), in µs. */
function cpuNow(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

const job = JSON.parse(process.argv[2]!) as PairsJob;
const sdk = installOtelSdk();
const collectGarbage = (globalThis as { gc?: () => void }).gc;
if (!collectGarbage) throw new Error('bench/telemetry-pairs.ts needs --expose-gc (runInChild passes it)');
const ways = [...WAYS];
const opened: Redis[] = [];

/**
 * Ends a turn: its queued spans go to the exporter and its garbage is collected, inside the turn's
 * CPU time. Otherwise a way's spans and garbage would be paid for by whichever way ran next.
 */
async function settle(): Promise<void> {
  await sdk.flushSpans();
  collectGarbage!();
}

/**
 * What `settle` costs when the turn before left nothing: mostly marking the live heap, the same for
 * every way (all engines live in this process). Taken at the start of each block and subtracted
 * from that block's turns, so that it does not dilute their differences.
 */
let idleSettleUs = 0;
async function measureIdleSettle(): Promise<void> {
  await settle();
  const before = cpuNow();
  await settle();
  idleSettleUs = cpuNow() - before;
}

async function engine(way: Way, autoPipelining: boolean): Promise<Redlock> {
  const clients = await connect(job.urls, autoPipelining);
  opened.push(...clients);
  const redlock = new Redlock(clients, { waitTimeoutMs: WAIT_MS, instrumentation: instrumentation(way) });
  await redlock.verifyMasters();
  return redlock;
}

/**
 * The order of the ways in each block: the rows of a Williams square, in which every way comes
 * first once and follows every other way exactly once, so what a turn leaves behind despite
 * `settle` falls on every way alike.
 */
const WILLIAMS_ROWS = [
  [0, 1, 3, 2],
  [1, 2, 0, 3],
  [2, 3, 1, 0],
  [3, 0, 2, 1],
] as const;
function turns(block: number): Way[] {
  return WILLIAMS_ROWS[block % WILLIAMS_ROWS.length]!.map((index) => ways[index]!);
}

const result = Object.fromEntries(
  ways.map((way) => [
    way,
    {
      cycleP50: 0,
      acquireP50: 0,
      singleCpuUs: 0,
      cycleP50Turns: [] as number[],
      acquireP50Turns: [] as number[],
      singleCpuTurns: [] as number[],
      pipelined: [] as number[],
      pipelinedCpuUs: 0,
      pipelinedCpuTurns: [] as number[],
      plain: [] as number[],
      plainCpuUs: 0,
      plainCpuTurns: [] as number[],
      errors: 0,
      hooksCpuUs: 0,
    },
  ]),
) as PairsResult;

// Scenario 1: one caller, fresh keys, no auto-pipelining.
const single = Object.fromEntries(await Promise.all(ways.map(async (way) => [way, await engine(way, false)] as const))) as Record<Way, Redlock>;
const cycles = Object.fromEntries(ways.map((way) => [way, [] as number[]])) as Record<Way, number[]>;
const acquires = Object.fromEntries(ways.map((way) => [way, [] as number[]])) as Record<Way, number[]>;
let key = 0;
const cpu = Object.fromEntries(ways.map((way) => [way, { us: 0, cycles: 0 }])) as Record<Way, { us: number; cycles: number }>;
const sequential = async (way: Way, count: number, record: boolean) => {
  const before = cpuNow();
  const turnCycles: number[] = [];
  const turnAcquires: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    const lock = await single[way].acquire(`bench:pairs:${process.pid}:${key++}`, job.ttlMs);
    const acquired = performance.now();
    await lock.release();
    turnCycles.push(performance.now() - start);
    turnAcquires.push(acquired - start);
  }
  await settle();
  if (!record) return;
  const spent = cpuNow() - before - idleSettleUs;
  cpu[way].us += spent;
  cpu[way].cycles += count;
  cycles[way].push(...turnCycles);
  acquires[way].push(...turnAcquires);
  result[way].cycleP50Turns.push(percentile(ascending(turnCycles), 50));
  result[way].acquireP50Turns.push(percentile(ascending(turnAcquires), 50));
  result[way].singleCpuTurns.push(spent / count);
};
for (const way of ways) await sequential(way, job.warmup, false);
for (let block = 0; block < job.blocks; block++) {
  await measureIdleSettle();
  for (const way of turns(block)) await sequential(way, job.cycles, true);
}
for (const way of ways) {
  result[way].cycleP50 = percentile(ascending(cycles[way]), 50);
  result[way].acquireP50 = percentile(ascending(acquires[way]), 50);
  result[way].singleCpuUs = cpu[way].us / cpu[way].cycles;
}

// Scenario 2: 200 callers on distinct keys, with and without auto-pipelining.
for (const mode of ['pipelined', 'plain'] as const) {
  const engines = Object.fromEntries(await Promise.all(ways.map(async (way) => [way, await engine(way, mode === 'pipelined')] as const))) as Record<Way, Redlock>;
  const spent = Object.fromEntries(ways.map((way) => [way, { us: 0, cycles: 0 }])) as Record<Way, { us: number; cycles: number }>;
  const cpuTurns = mode === 'pipelined' ? 'pipelinedCpuTurns' : 'plainCpuTurns';
  const rate = async (way: Way, ms: number, record: boolean) => {
    let done = 0;
    let running = true;
    const before = cpuNow();
    const callers = Array.from({ length: job.callers }, async (_, index) => {
      const name = `bench:pairs:${process.pid}:${mode}:${way}:${index}`;
      while (running) {
        try {
          await (await engines[way].acquire(name, job.ttlMs)).release();
          done++;
        } catch {
          // A starved machine can miss the node timeout on every master: counted, as scenario 2 does.
          result[way].errors++;
        }
      }
    });
    const start = performance.now();
    await sleep(ms);
    running = false;
    const elapsed = performance.now() - start;
    const counted = done;
    await Promise.all(callers);
    await settle();
    if (record) {
      const us = cpuNow() - before - idleSettleUs;
      spent[way].us += us;
      spent[way].cycles += done;
      result[way][cpuTurns].push(us / done);
    }
    return (counted * 1000) / elapsed;
  };
  for (const way of ways) await rate(way, job.blockMs, false); // warm-up turn
  for (let block = 0; block < job.blocks; block++) {
    await measureIdleSettle();
    for (const way of turns(block)) result[way][mode].push(await rate(way, job.blockMs, true));
  }
  for (const way of ways) result[way][mode === 'pipelined' ? 'pipelinedCpuUs' : 'plainCpuUs'] = spent[way].us / spent[way].cycles;
  for (const redlock of Object.values(engines)) redlock.close();
}

// The hooks alone, as the engine calls them for one uncontended acquire and release: no Redis,
// no other process, so this is the telemetry's own CPU cost per cycle, free of the machine's noise.
const HOOK_CYCLES = 200_000;
const fakeLock = { resources: ['bench:hooks'] } as unknown as Lock;
for (const way of ways) {
  const hooks = instrumentation(way);
  if (!hooks) continue;
  const guard = new InstrumentationGuard(hooks, console);
  const cycle = () => {
    // The call's start and the grant are the engine's own clock reads, made with telemetry off
    // too: the hooks are handed them, so they are not read here.
    const observer = guard.acquireStarted(fakeLock.resources, job.ttlMs, 0);
    observer?.round(3, 0.15);
    guard.lockHeld(fakeLock);
    observer?.ended('acquired', undefined, 0.15);
    guard.lockReleased(fakeLock, 0.2);
  };
  for (let i = 0; i < HOOK_CYCLES / 4; i++) cycle();
  const before = cpuNow();
  for (let i = 0; i < HOOK_CYCLES; i++) cycle();
  result[way].hooksCpuUs = (cpuNow() - before) / HOOK_CYCLES;
}

for (const redlock of Object.values(single)) redlock.close();
disconnect(opened);
reportAndExit(result);
