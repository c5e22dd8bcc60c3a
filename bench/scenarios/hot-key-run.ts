import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { LIMIT, type LibraryId } from '../adapters/index.js';
import { nextMessage } from '../support/ipc.js';
import { overlappingHolds } from '../support/holds.js';
import { ascending, mean, percentile } from '../support/stats.js';
import type { WorkerGo, WorkerJob, WorkerReport } from './hot-key-worker.js';
import type { Figures, Metric } from './scenario.js';

const WORKER = fileURLToPath(new URL('./hot-key-worker.ts', import.meta.url));
/** Let every process get through its first round before the clock starts. */
const START_DELAY_MS = 300;

/** The contended scenarios' workers: so many processes of so many workers, on one key. */
export interface HotKeyShape {
  processes: number;
  workersPerProcess: number;
  holdMs: number;
  /** The measuring window; with `cycles`, only a deadline. */
  durationMs: number;
  graceMs: number;
  ttlMs: number;
  /** Each worker's number of acquires (default: as many as fit in the window). */
  cycles?: number;
}

export interface HotKeyRun {
  reports: WorkerReport[];
  /** With a store: the counter every hold incremented (lost updates = holds − counter). */
  counter?: number;
  /**
   * The masters' user+system CPU (INFO cpu, summed over them) from just before the start to the
   * last report, in ms: with the workers' own (WorkerReport.cpuMs), what the run cost the machine.
   */
  mastersCpuMs: number;
  /** The scripts the masters were sent (EVALSHA and EVAL calls, summed over them) over the same time. */
  mastersScripts: number;
}

/**
 * Forks the worker processes (bench/scenarios/hot-key-worker.ts), starts them together on the
 * shared monotonic clock and collects their reports. The limit (LIMIT) runs every worker in ONE
 * process around its in-process gate: no Redis lock, the same critical sections.
 */
export async function runHotKey(
  library: LibraryId,
  urls: readonly string[],
  shape: HotKeyShape,
  extra: Pick<WorkerJob, 'limit' | 'permits' | 'readShare'> & { storeUrl?: string } = {},
): Promise<HotKeyRun> {
  const { storeUrl, ...kind } = extra;
  const key = `bench:hot:${process.pid}:${Date.now()}`;
  const job: WorkerJob = {
    library,
    urls: [...urls],
    key,
    workers: library === LIMIT ? shape.processes * shape.workersPerProcess : shape.workersPerProcess,
    holdMs: shape.holdMs,
    ttlMs: shape.ttlMs,
    graceMs: shape.graceMs,
    ...(shape.cycles === undefined ? {} : { cycles: shape.cycles }),
    ...(storeUrl ? { store: { url: storeUrl, key: `${key}:counter` } } : {}),
    ...kind,
  };
  const children = Array.from({ length: library === LIMIT ? 1 : shape.processes }, () => fork(WORKER, [JSON.stringify(job)]));
  try {
    await Promise.all(children.map((child) => nextMessage(child, 'hot-key worker')));
    const startAt = process.hrtime.bigint() + BigInt(START_DELAY_MS * 1e6);
    const go: WorkerGo = { startAt: String(startAt), endAt: String(startAt + BigInt(shape.durationMs * 1e6)) };
    const replies = children.map((child) => nextMessage<WorkerReport>(child, 'hot-key worker'));
    const before = await mastersUsage(urls);
    for (const child of children) child.send(go);
    const reports = await Promise.all(replies);
    const after = await mastersUsage(urls);
    const masters = { mastersCpuMs: after.cpuMs - before.cpuMs, mastersScripts: after.scripts - before.scripts };
    if (!storeUrl) return { reports, ...masters };
    const store = new Redis(storeUrl);
    try {
      return { reports, counter: Number((await store.get(`${key}:counter`)) ?? 0), ...masters };
    } finally {
      store.disconnect();
    }
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  }
}

/**
 * The masters' user+system CPU so far (INFO cpu: every thread of each server) in ms, and the
 * scripts they were sent (INFO commandstats: EVALSHA and EVAL, which a script cannot call, so
 * every one came from a client), summed over them.
 */
async function mastersUsage(urls: readonly string[]): Promise<{ cpuMs: number; scripts: number }> {
  const used = await Promise.all(
    urls.map(async (url) => {
      const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
      try {
        await client.connect();
        const info = `${await client.info('cpu')}\n${await client.info('commandstats')}`;
        // A CPU field missing is unknown (NaN); a command missing from commandstats was never called.
        const field = (pattern: string, missing: number) => Number(new RegExp(pattern, 'm').exec(info)?.[1] ?? missing);
        return {
          cpuMs: (field('^used_cpu_sys:([\\d.]+)', Number.NaN) + field('^used_cpu_user:([\\d.]+)', Number.NaN)) * 1000,
          scripts: field('^cmdstat_evalsha:calls=(\\d+)', 0) + field('^cmdstat_eval:calls=(\\d+)', 0),
        };
      } finally {
        client.disconnect();
      }
    }),
  );
  return { cpuMs: used.reduce((sum, one) => sum + one.cpuMs, 0), scripts: used.reduce((sum, one) => sum + one.scripts, 0) };
}

/** The columns of summarizeMutex's figures. */
export const MUTEX_METRICS: readonly Metric[] = [
  { key: 'insideShare', label: 'share inside lock', better: 'higher', digits: 3 },
  { key: 'waitP50', label: 'wait p50 (ms)', better: 'lower', digits: 1 },
  { key: 'waitP99', label: 'wait p99 (ms)', better: 'lower', digits: 1 },
  { key: 'waitMax', label: 'wait max (ms)', better: 'lower', digits: 1 },
  { key: 'idealWait', label: 'ideal FIFO wait (ms)', better: 'lower', digits: 1, informational: true },
  { key: 'meanHold', label: 'mean hold (ms)', better: 'lower', digits: 2, informational: true },
  { key: 'handoverP50', label: 'hand-over p50 (ms)', better: 'lower', digits: 2 },
  { key: 'crossShare', label: 'turns to another process', better: 'lower', digits: 2, informational: true },
  { key: 'handoverSame', label: 'hand-over mean, same process (ms)', better: 'lower', digits: 2, informational: true },
  { key: 'handoverCross', label: 'hand-over mean, to another process (ms)', better: 'lower', digits: 2, informational: true },
  { key: 'cycles', label: 'holds', better: 'higher', digits: 0, informational: true },
  { key: 'failures', label: 'failed acquires', better: 'lower', digits: 0, informational: true },
  { key: 'censored', label: 'waits cut off', better: 'lower', digits: 0, informational: true },
  { key: 'overlaps', label: 'overlaps', better: 'lower', digits: 0, informational: true },
];

/**
 * The mutex figures of a run over a window of `windowNs` from the start: share of the window
 * inside the lock, waits against the ideal FIFO wait, hand-over, holds, overlaps.
 */
export function summarizeMutex(reports: readonly WorkerReport[], contenders: number, windowNs: number): Figures {
  // Each hold with the process it ran in: a turn between two of them stays in it or leaves it.
  const holds = reports.flatMap((r, process) => r.holds.map(([from, to]) => [from, to, process] as const)).sort((a, b) => a[0] - b[0]);
  const inside = holds.reduce((sum, [from, to]) => sum + Math.max(0, Math.min(to, windowNs) - Math.max(from, 0)), 0);
  const waits = ascending(reports.flatMap((r) => r.waits));
  const meanHoldMs = mean(holds.map(([from, to]) => (to - from) / 1e6));
  const inWindow = holds.filter(([from]) => from < windowNs);
  const handovers = inWindow.slice(1).map(([from], i) => (from - inWindow[i]![1]) / 1e6);
  const leaves = inWindow.slice(1).map(([, , process], i) => process !== inWindow[i]![2]);
  return {
    insideShare: inside / windowNs,
    waitP50: percentile(waits, 50),
    waitP99: percentile(waits, 99),
    waitMax: waits.at(-1) ?? Number.NaN,
    idealWait: (contenders - 1) * meanHoldMs,
    meanHold: meanHoldMs,
    handoverP50: percentile(ascending(handovers), 50),
    ...handOverTurns(handovers, leaves),
    cycles: inWindow.length,
    failures: reports.reduce((sum, r) => sum + r.failures, 0),
    censored: reports.reduce((sum, r) => sum + r.censored, 0),
    overlaps: overlappingHolds(holds),
  };
}

/**
 * The turns of the lock (the gaps between consecutive holds, and whether each went to another
 * process), by where they go: the share that passes to a worker of another process, and the mean
 * gap of the turns that stay in the process and of those that leave it. A turn within a process
 * can be a hand-over without the masters; one to another process always goes through them.
 */
function handOverTurns(gaps: readonly number[], leaves: readonly boolean[]): Figures {
  const same = gaps.filter((_, i) => !leaves[i]);
  const cross = gaps.filter((_, i) => leaves[i]);
  // A figure with nothing to measure is left out (a NaN would reach the parent as null).
  return {
    ...(gaps.length ? { crossShare: cross.length / gaps.length } : {}),
    ...(same.length ? { handoverSame: mean(same) } : {}),
    ...(cross.length ? { handoverCross: mean(cross) } : {}),
  };
}

/** A turn's parts summed (see handOverTurns): the hold, then the gap, in or out of the process as often as it is. */
export function turnFromParts(figure: (key: string) => number): number {
  const share = figure('crossShare');
  const cross = share > 0 ? share * figure('handoverCross') : 0;
  return figure('meanHold') + (1 - share) * figure('handoverSame') + cross;
}
