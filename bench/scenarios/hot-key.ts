import { LIBRARIES, LIMIT } from '../adapters/index.js';
import { MUTEX_METRICS, runHotKey, summarizeMutex, type HotKeyShape } from './hot-key-run.js';
import type { Scenario } from './scenario.js';

type Params = HotKeyShape;

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
  metrics: MUTEX_METRICS,
  params: {
    full: { processes: 4, workersPerProcess: 5, holdMs: 2, durationMs: 12_000, graceMs: 3_000, ttlMs: 10_000 },
    smoke: { processes: 2, workersPerProcess: 2, holdMs: 2, durationMs: 1_000, graceMs: 500, ttlMs: 10_000 },
  },

  async run({ library, urls, params }) {
    const { reports } = await runHotKey(library, urls, params);
    return summarizeMutex(reports, params.processes * params.workersPerProcess, params.durationMs * 1e6);
  },
};
