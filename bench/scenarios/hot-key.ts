import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { LIBRARIES, LIMIT } from '../adapters/index.js';
import { nextMessage } from '../support/ipc.js';
import { ascending, mean, percentile } from '../support/stats.js';
import type { WorkerGo, WorkerJob, WorkerReport } from './hot-key-worker.js';
import type { Figures, Scenario } from './scenario.js';

interface Params {
  processes: number;
  workersPerProcess: number;
  holdMs: number;
  durationMs: number;
  graceMs: number;
  ttlMs: number;
}

const WORKER = fileURLToPath(new URL('./hot-key-worker.ts', import.meta.url));
/** Let every process get through its first round before the clock starts. */
const START_DELAY_MS = 300;
/** "No starvation": no acquire failed (waited out 30 s) and none waited over this many ideal waits. */
export const STARVATION_FACTOR = 10;

/** Scenario 3: one key, 20 contenders in 4 processes: how much of the time is the lock doing work? */
export const hotKey: Scenario<Params> = {
  id: 'hot-key',
  title: '3. Hot key: 4 processes x 5 workers, 2 ms critical section',
  libraries: [...LIBRARIES, LIMIT],
  limitMetric: 'cycles',
  method: (p) =>
    `${p.processes} forked processes x ${p.workersPerProcess} async workers loop on ONE key for ` +
    `${p.durationMs / 1000} s; each holds it for \`await setTimeout(${p.holdMs})\` (I/O, not CPU), ttl ` +
    `${p.ttlMs} ms. Share inside the lock = sum of hold intervals (acquired → release called) clipped ` +
    'to the window / window length. Wait = ask → acquired, for every acquire asked in the window; ' +
    `one still waiting ${p.graceMs / 1000} s after the window counts with its wait so far (a lower ` +
    'bound, "cut off" below). ' +
    'Ideal FIFO wait = (contenders − 1) × mean hold: with a perfect queue and free hand-over, each ' +
    `caller waits for the ${p.processes * p.workersPerProcess - 1} others' holds. Hand-over = from one ` +
    'hold\'s release call to the next hold: what the lock costs per turn (share ≈ hold ÷ (hold + ' +
    'hand-over)). Overlaps: hold ' +
    'intervals of different workers that intersect on the shared monotonic clock (must be 0). ' +
    `The limit: the same ${p.processes * p.workersPerProcess} workers and critical sections in ONE process around a ` +
    'perfect in-process FIFO mutex (no Redis lock at all); "share of the limit" = holds ÷ the limit\'s holds.',
  metrics: [
    { key: 'insideShare', label: 'share inside lock', better: 'higher', digits: 3 },
    { key: 'waitP50', label: 'wait p50 (ms)', better: 'lower', digits: 1 },
    { key: 'waitP99', label: 'wait p99 (ms)', better: 'lower', digits: 1 },
    { key: 'waitMax', label: 'wait max (ms)', better: 'lower', digits: 1 },
    { key: 'idealWait', label: 'ideal FIFO wait (ms)', better: 'lower', digits: 1, informational: true },
    { key: 'meanHold', label: 'mean hold (ms)', better: 'lower', digits: 2, informational: true },
    { key: 'handoverP50', label: 'hand-over p50 (ms)', better: 'lower', digits: 2 },
    { key: 'cycles', label: 'holds', better: 'higher', digits: 0, informational: true },
    { key: 'failures', label: 'failed acquires', better: 'lower', digits: 0, informational: true },
    { key: 'censored', label: 'waits cut off', better: 'lower', digits: 0, informational: true },
    { key: 'overlaps', label: 'overlaps', better: 'lower', digits: 0, informational: true },
  ],
  params: {
    full: { processes: 4, workersPerProcess: 5, holdMs: 2, durationMs: 12_000, graceMs: 3_000, ttlMs: 10_000 },
    smoke: { processes: 2, workersPerProcess: 2, holdMs: 2, durationMs: 1_000, graceMs: 500, ttlMs: 10_000 },
  },

  async run({ library, urls, params }) {
    const job: WorkerJob = {
      library,
      urls: [...urls],
      key: `bench:hot:${process.pid}:${Date.now()}`,
      workers: library === LIMIT ? params.processes * params.workersPerProcess : params.workersPerProcess,
      holdMs: params.holdMs,
      ttlMs: params.ttlMs,
      graceMs: params.graceMs,
    };
    const children = Array.from({ length: library === LIMIT ? 1 : params.processes }, () => fork(WORKER, [JSON.stringify(job)]));
    try {
      await Promise.all(children.map((child) => nextMessage(child, 'hot-key worker')));
      const startAt = process.hrtime.bigint() + BigInt(START_DELAY_MS * 1e6);
      const go: WorkerGo = { startAt: String(startAt), endAt: String(startAt + BigInt(params.durationMs * 1e6)) };
      const reports = children.map((child) => nextMessage<WorkerReport>(child, 'hot-key worker'));
      for (const child of children) child.send(go);
      return summarize(await Promise.all(reports), params);
    } finally {
      for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    }
  },
};

function summarize(reports: WorkerReport[], params: Params): Figures {
  const windowNs = params.durationMs * 1e6;
  const holds = reports.flatMap((r) => r.holds).sort((a, b) => a[0] - b[0]);
  const inside = holds.reduce((sum, [from, to]) => sum + Math.max(0, Math.min(to, windowNs) - Math.max(from, 0)), 0);
  let overlaps = 0;
  let lastEnd = -Infinity;
  for (const [from, to] of holds) {
    if (from < lastEnd) overlaps++;
    lastEnd = Math.max(lastEnd, to);
  }
  const waits = ascending(reports.flatMap((r) => r.waits));
  const contenders = params.processes * params.workersPerProcess;
  const meanHoldMs = mean(holds.map(([from, to]) => (to - from) / 1e6));
  const inWindow = holds.filter(([from]) => from < windowNs);
  const handovers = inWindow.slice(1).map(([from], i) => (from - inWindow[i]![1]) / 1e6);
  return {
    insideShare: inside / windowNs,
    waitP50: percentile(waits, 50),
    waitP99: percentile(waits, 99),
    waitMax: waits.at(-1) ?? Number.NaN,
    idealWait: (contenders - 1) * meanHoldMs,
    meanHold: meanHoldMs,
    handoverP50: percentile(ascending(handovers), 50),
    cycles: holds.filter(([from]) => from < windowNs).length,
    failures: reports.reduce((sum, r) => sum + r.failures, 0),
    censored: reports.reduce((sum, r) => sum + r.censored, 0),
    overlaps,
  };
}
