import { availableParallelism } from 'node:os';
import { LIMIT, OURS, OURS_AND_BASE, type LibraryId } from '../adapters/index.js';
import { mostAtOnce, writerOverlaps } from '../support/holds.js';
import { ascending, percentile } from '../support/stats.js';
import { runHotKey, type HotKeyRun, type HotKeyShape } from './hot-key-run.js';
import type { WorkerJob, WorkerReport } from './hot-key-worker.js';
import type { Figures, Scenario } from './scenario.js';

// The hot key of scenario 3, held as a semaphore's permits (beside redis-semaphore's
// RedlockSemaphore, the one peer that has a Redlock semaphore) and as a read-write lock (no
// Node peer has one: ours alone beside the limit, read-heavy and write-heavy).

type Params = HotKeyShape;

interface SemaphoreParams extends Params {
  limit: number;
}

interface WeightedParams extends SemaphoreParams {
  /** Each acquire takes one of these weights at random. */
  permits: number[];
}

interface ReadWriteParams extends Params {
  readShare: number;
}

const FULL: Params = { processes: 4, workersPerProcess: 5, holdMs: 2, durationMs: 12_000, graceMs: 3_000, ttlMs: 10_000 };
const SMOKE: Params = { processes: 2, workersPerProcess: 2, holdMs: 2, durationMs: 1_000, graceMs: 500, ttlMs: 10_000 };

const waitMetrics = [
  { key: 'throughput', label: 'holds/s', better: 'higher', digits: 0 },
  { key: 'waitP50', label: 'wait p50 (ms)', better: 'lower', digits: 1 },
  { key: 'waitP99', label: 'wait p99 (ms)', better: 'lower', digits: 1 },
] as const;

/** Scenario 3b: one key, 20 contenders in 4 processes, at most 4 holders. */
export const hotSemaphore: Scenario<SemaphoreParams> = {
  id: 'hot-semaphore',
  title: '3b. Hot semaphore: limit 4, 4 processes x 5 workers, 2 ms critical section',
  libraries: [...OURS_AND_BASE, 'redis-semaphore', LIMIT],
  limitMetric: 'throughput',
  method: (p) =>
    `As scenario 3, but each acquire asks for a permit of a semaphore of limit ${p.limit} ` +
    '(ours: `acquire(key, ttl, { limit })`; redis-semaphore: `new RedlockSemaphore(clients, key, limit)`), ' +
    `${p.processes} processes x ${p.workersPerProcess} workers, ${p.durationMs / 1000} s. Permit share = sum of ` +
    `hold intervals clipped to the window / (limit x window): how much of the ${p.limit} permits' time did work. ` +
    'Most at once: the largest number of hold intervals that intersect on the shared monotonic clock ' +
    `(must be at most ${p.limit}). The limit: the same workers in ONE process around a perfect in-process FIFO ` +
    `semaphore of ${p.limit} (no Redis lock at all); "share of the limit" = holds/s ÷ the limit's.`,
  metrics: semaphoreMetrics('most at once'),
  params: { full: { ...FULL, limit: 4 }, smoke: { ...SMOKE, limit: 2 } },
  async run({ library, urls, params }) {
    return semaphoreFigures(await runWorkers(library, urls, params, { limit: params.limit }), params);
  },
};

/** Scenario 3b, weighted: the same contenders, each acquire taking 1, 2 or 3 permits of 8. */
export const hotWeightedSemaphore: Scenario<WeightedParams> = {
  id: 'hot-weighted-semaphore',
  title: '3b-w. Hot weighted semaphore: limit 8, each acquire 1 to 3 permits, 4 processes x 5 workers, 2 ms critical section',
  libraries: [...OURS_AND_BASE, 'redis-semaphore', LIMIT],
  limitMetric: 'throughput',
  method: (p) =>
    `As 3b, but each acquire takes ${p.permits.join(', ')} permits at random (the same draw for every library) of a ` +
    `semaphore of limit ${p.limit} (ours: \`acquire(key, ttl, { limit, permits })\`; redis-semaphore: ` +
    '`new RedlockMultiSemaphore(clients, key, limit, permits)`). Permit share = sum of hold intervals clipped to the ' +
    `window, each times its weight / (limit x window). Most permits at once: the largest sum of weights of hold ` +
    `intervals that intersect (must be at most ${p.limit}). The limit: the same workers in ONE process around a perfect ` +
    'in-process FIFO weighted semaphore (the head of the line gets in once enough permits are free; nobody overtakes it).',
  metrics: semaphoreMetrics('most permits at once'),
  params: { full: { ...FULL, limit: 8, permits: [1, 2, 3] }, smoke: { ...SMOKE, limit: 4, permits: [1, 2, 3] } },
  async run({ library, urls, params }) {
    return semaphoreFigures(await runWorkers(library, urls, params, { limit: params.limit, permits: params.permits }), params);
  },
};

/** The figures of 3b and 3b-w, with what "most at once" counts (holders, or permits by weight). */
function semaphoreMetrics(mostLabel: string): Scenario<SemaphoreParams>['metrics'] {
  return [
    { key: 'permitShare', label: 'permit share used', better: 'higher', digits: 3 },
    ...waitMetrics,
    { key: 'waitMax', label: 'wait max (ms)', better: 'lower', digits: 1 },
    { key: 'mostAtOnce', label: mostLabel, better: 'lower', digits: 0, informational: true },
    { key: 'failures', label: 'failed acquires', better: 'lower', digits: 0, informational: true },
    { key: 'censored', label: 'waits cut off', better: 'lower', digits: 0, informational: true },
  ];
}

/** 3b and 3b-w from the workers' reports: each hold counts with its weight (1 without weighted permits). */
function semaphoreFigures(reports: readonly WorkerReport[], params: SemaphoreParams): Figures {
  const holds = reports.flatMap((r) => r.holds);
  const weights = reports.flatMap((r) => r.holdPermits ?? r.holds.map(() => 1));
  const windowNs = params.durationMs * 1e6;
  const inside = holds.reduce((sum, [from, to], i) => sum + weights[i]! * Math.max(0, Math.min(to, windowNs) - Math.max(from, 0)), 0);
  return {
    permitShare: inside / (params.limit * windowNs),
    ...waits(reports.flatMap((r) => r.waits), holds, params),
    waitMax: ascending(reports.flatMap((r) => r.waits)).at(-1) ?? Number.NaN,
    mostAtOnce: mostAtOnce(holds, weights),
    failures: reports.reduce((sum, r) => sum + r.failures, 0),
    censored: reports.reduce((sum, r) => sum + r.censored, 0),
  };
}

function readWrite(id: string, title: string, readShare: number): Scenario<ReadWriteParams> {
  return {
    id,
    title,
    libraries: [...OURS_AND_BASE, LIMIT],
    limitMetric: 'throughput',
    method: (p) =>
      `As scenario 3, each acquire a reader with probability ${p.readShare} (\`{ mode: 'read' }\`), else a writer, ` +
      `${p.processes} processes x ${p.workersPerProcess} workers, ${p.durationMs / 1000} s. No Node library has a ` +
      'read-write lock to compare with. Read / write wait p99: of the readers\' and of the writers\' waits alone ' +
      '(ask → holding; one still waiting after the grace counts with its wait so far, "cut off" below): a ' +
      'starved writer shows in the write wait. Writer overlaps: hold intervals of a writer that intersect any ' +
      'other hold (must be 0). Most readers at once: the largest number of readers holding together. The limit: ' +
      `the same ${p.processes * p.workersPerProcess} workers, the same reader / writer draw and critical sections in ONE ` +
      'process around a perfect in-process read-write lock (no Redis lock at all): readers share, a writer is alone, ' +
      'waiters get in strictly in arrival order (a writer waits only for those who asked before it; a release lets in ' +
      'one writer or every reader up to the next writer); "share of the limit" = holds/s ÷ the limit\'s. CPU per hold: ' +
      'the lock processes\' own user+system CPU (`process.cpuUsage()`) and the masters\' (INFO cpu), from the start to ' +
      'the last release, ÷ every hold; cores busy: that CPU ÷ the same wall time; scripts per hold: the EVALSHA and EVAL ' +
      'calls the masters were sent (INFO commandstats), ÷ every hold. Readers only: right after each run, ' +
      `the same processes and workers for ${Math.min(p.durationMs, READ_ONLY_MS) / 1000} s with every acquire a reader.`,
    metrics: [
      ...waitMetrics,
      { key: 'readWaitP99', label: 'read wait p99 (ms)', better: 'lower', digits: 1 },
      { key: 'writeWaitP99', label: 'write wait p99 (ms)', better: 'lower', digits: 1 },
      { key: 'mostReaders', label: 'most readers at once', better: 'higher', digits: 0, informational: true },
      { key: 'writerOverlaps', label: 'writer overlaps', better: 'lower', digits: 0, informational: true },
      { key: 'failures', label: 'failed acquires', better: 'lower', digits: 0, informational: true },
      { key: 'censored', label: 'waits cut off', better: 'lower', digits: 0, informational: true },
      { key: 'cpuPerHold', label: 'CPU per hold (µs, lock processes + masters)', better: 'lower', digits: 0, informational: true },
      { key: 'busyCores', label: `cores busy (of ${CORES})`, better: 'lower', digits: 2, informational: true },
      { key: 'scriptsPerHold', label: 'scripts sent the masters per hold', better: 'lower', digits: 2, informational: true },
      { key: 'readOnlyThroughput', label: 'readers only: holds/s', better: 'higher', digits: 0, informational: true },
      { key: 'readOnlyCpuPerHold', label: 'readers only: CPU per hold (µs)', better: 'lower', digits: 0, informational: true },
      { key: 'readOnlyScriptsPerHold', label: 'readers only: scripts per hold', better: 'lower', digits: 2, informational: true },
    ],
    params: { full: { ...FULL, readShare }, smoke: { ...SMOKE, readShare } },
    explain: explainMachineBound,
    async run({ library, urls, params }) {
      const run = await runHotKey(library, urls, params, { readShare: params.readShare });
      const reports = run.reports;
      // The least a hold on the masters costs this machine: every acquire a reader, so none is
      // ever refused (one acquire round and one release round per hold). The limit has no masters.
      const readOnlyShape = { ...params, durationMs: Math.min(params.durationMs, READ_ONLY_MS) };
      const readOnly = library === LIMIT ? undefined : await runHotKey(library, urls, readOnlyShape, { readShare: 1 });
      const holds = reports.flatMap((r) => r.holds.map(([from, to], i) => ({ from, to, mode: r.holdModes![i]! })));
      const byMode = (mode: 'r' | 'w') =>
        ascending(reports.flatMap((r) => r.waitModes!.flatMap((m, i) => (m === mode ? [r.waits[i]!] : []))));
      return {
        ...waits(reports.flatMap((r) => r.waits), reports.flatMap((r) => r.holds), params),
        readWaitP99: percentile(byMode('r'), 99),
        writeWaitP99: percentile(byMode('w'), 99),
        mostReaders: mostAtOnce(holds.filter((h) => h.mode === 'r').map((h) => [h.from, h.to])),
        writerOverlaps: writerOverlaps(holds),
        failures: reports.reduce((sum, r) => sum + r.failures, 0),
        censored: reports.reduce((sum, r) => sum + r.censored, 0),
        ...machineCost(run),
        ...(readOnly ? readOnlyFigures(readOnly, readOnlyShape) : {}),
      };
    },
  };
}

const CORES = availableParallelism();
/** The readers-only run after each read-write run: long enough for a steady rate, shorter than the run. */
const READ_ONLY_MS = 6_000;

/** What a run cost the machine: its lock processes' and masters' CPU per hold (µs), and how many cores that kept busy. */
function machineCost(run: HotKeyRun): { cpuPerHold: number; busyCores: number; scriptsPerHold: number } {
  const holds = run.reports.reduce((sum, r) => sum + r.holds.length, 0);
  const cpuMs = run.reports.reduce((sum, r) => sum + r.cpuMs, 0) + run.mastersCpuMs;
  const wallMs = Math.max(...run.reports.map((r) => r.finishedAt)) / 1e6;
  return { cpuPerHold: (cpuMs * 1000) / holds, busyCores: cpuMs / wallMs, scriptsPerHold: run.mastersScripts / holds };
}

/** The readers-only run's figures: its holds/s in its window, and what a hold cost. */
function readOnlyFigures(run: HotKeyRun, shape: Params): Figures {
  const cost = machineCost(run);
  return {
    readOnlyThroughput: waits([], run.reports.flatMap((r) => r.holds), shape).throughput!,
    readOnlyCpuPerHold: cost.cpuPerHold,
    readOnlyScriptsPerHold: cost.scriptsPerHold,
  };
}

/**
 * 3c and 3d against the machine: the lock's processes and the masters share its cores, so the
 * holds/s a core allows is bounded by what one hold costs them. A hold with readers only is the
 * cheapest a hold on the masters gets; all the cores spent on such holds give the bound.
 */
function explainMachineBound(median: (library: LibraryId, key: string) => number): string[] {
  const limit = median(LIMIT, 'throughput');
  const ours = median(OURS, 'throughput');
  const cpu = median(OURS, 'cpuPerHold');
  const busy = median(OURS, 'busyCores');
  const readOnly = median(OURS, 'readOnlyThroughput');
  const readOnlyCpu = median(OURS, 'readOnlyCpuPerHold');
  if ([limit, ours, cpu, busy, readOnly, readOnlyCpu].some(Number.isNaN)) return [];
  const bound = (CORES * 1e6) / readOnlyCpu;
  const needed = 0.6 * limit;
  const allowed = (CORES * 1e6) / needed;
  const f = (x: number) => Math.round(x).toLocaleString('en');
  return [
    `**What bounds the share on this machine.** The lock's processes and its 5 masters share this machine's ${CORES} cores, ` +
      `so a hold costs CPU wherever it runs. Ours: ${f(cpu)} µs of CPU per hold (processes and masters together, user+system), ` +
      `${busy.toFixed(2)} of ${CORES} cores busy, and ${busy.toFixed(2)} × 10⁶ ÷ ${f(cpu)} µs = ${f((busy * 1e6) / cpu)} holds/s ` +
      `against the ${f(ours)} measured (holds that began in the window only). With readers only, right after each run (nobody ` +
      `refused: one acquire round and one release round per hold, the least a hold on the masters costs), ours made ` +
      `${f(readOnly)} holds/s at ${f(readOnlyCpu)} µs per hold. At that cost, all ${CORES} cores would make about ${f(bound)} holds/s: ` +
      `${(bound / limit).toFixed(3)} of this scenario's limit (${f(limit)}): an estimate, since a hold's cost was measured at ` +
      `that run's load, not with every core busy. ` +
      (bound >= limit
        ? // A write-heavy mix: the cores would carry more holds than the perfect lock itself makes.
          `That is more than the limit itself: the CPU does not bound this mix. Its writers hold alone, one after another, so ` +
          `what does is the turn from one holder to the next where a writer takes or gives up the lock: ours goes through the ` +
          `masters (a release, then their grant), the perfect lock's costs nothing.`
        : `A share of 0.6 (${f(needed)} holds/s) needs a hold to cost at most ${f(allowed)} µs of this machine's CPU, ` +
          `${allowed >= readOnlyCpu ? 'more' : 'less'} than a readers-only hold's ${f(readOnlyCpu)}.`),
  ];
}

/** Scenario 3c: 90% readers. */
export const readHeavy = readWrite('rw-read-heavy', '3c. Read-write lock, read-heavy: 90% readers, 4 processes x 5 workers', 0.9);
/** Scenario 3d: 20% readers. */
export const writeHeavy = readWrite('rw-write-heavy', '3d. Read-write lock, write-heavy: 20% readers, 4 processes x 5 workers', 0.2);

function runWorkers(library: LibraryId, urls: readonly string[], params: Params, shape: Pick<WorkerJob, 'limit' | 'permits' | 'readShare'>): Promise<WorkerReport[]> {
  return runHotKey(library, urls, params, shape).then((run) => run.reports);
}

function waits(all: number[], holds: readonly [number, number][], params: Params): Figures {
  const sorted = ascending(all);
  const inWindow = holds.filter(([from]) => from < params.durationMs * 1e6).length;
  return { throughput: inWindow / (params.durationMs / 1000), waitP50: percentile(sorted, 50), waitP99: percentile(sorted, 99) };
}
