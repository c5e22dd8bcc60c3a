import { LIBRARIES, LIMIT, OURS, type LibraryId } from '../adapters/index.js';
import { MUTEX_METRICS, runHotKey, summarizeMutex, turnFromParts, type HotKeyShape } from './hot-key-run.js';
import type { Figures, Scenario } from './scenario.js';

type Params = HotKeyShape & { cycles: number };

/**
 * Scenario 3a, issue 17's own workload: 4 processes x 5 workers on one key, 40 acquires each,
 * every hold a read-modify-write of a store (GET, 2 ms, SET: two round trips to a Redis of its
 * own), beside the same workers around a perfect in-process mutex: the share of that limit.
 */
export const hotKeyStore: Scenario<Params> = {
  id: 'hot-key-store',
  title: '3a. Hot key with store round trips (issue 17\'s workload): 4 processes x 5 workers, 40 cycles each',
  libraries: [...LIBRARIES, LIMIT],
  limitMetric: 'throughput',
  method: (p) =>
    `${p.processes} forked processes x ${p.workersPerProcess} async workers, ${p.cycles} acquires each, on ONE key; ` +
    `each hold reads a counter from a store (GET, a redis-server apart from the masters), waits ` +
    `\`setTimeout(${p.holdMs})\` and writes it back one higher (SET): ${p.holdMs} ms plus two store round trips, ` +
    `ttl ${p.ttlMs} ms. The run lasts from the common start until every worker's last release has answered, ` +
    `or ${p.durationMs / 1000} s at most (then the holds begun by then count, and waits still open ${p.graceMs / 1000} s later ` +
    'are cut off); holds/s = holds ÷ that. The limit: the same ' +
    `${p.processes * p.workersPerProcess} workers and critical sections (store round trips included) in ONE process around a perfect ` +
    'in-process FIFO mutex, no Redis lock at all; "share of the limit" = holds/s ÷ the limit\'s. Ideal FIFO wait = ' +
    '(contenders − 1) × mean hold; "p99 ÷ ideal" is each repetition\'s own ratio. Lost updates = holds − the ' +
    'counter\'s final value (a second check of mutual exclusion, beside overlapping hold intervals).',
  metrics: [
    { key: 'throughput', label: 'holds/s', better: 'higher', digits: 0 },
    ...MUTEX_METRICS,
    { key: 'p99OfIdeal', label: 'wait p99 ÷ ideal FIFO', better: 'lower', digits: 2 },
    { key: 'lostUpdates', label: 'lost updates', better: 'lower', digits: 0, informational: true },
  ],
  explain: (median) => explainTurns(median, 0.85),
  params: {
    full: { processes: 4, workersPerProcess: 5, holdMs: 2, cycles: 40, durationMs: 15_000, graceMs: 3_000, ttlMs: 10_000 },
    smoke: { processes: 2, workersPerProcess: 2, holdMs: 2, cycles: 10, durationMs: 5_000, graceMs: 500, ttlMs: 10_000 },
  },

  async run({ library, urls, storeUrl, params }) {
    if (!storeUrl) throw new Error('hot-key-store needs a store (run.ts starts one)');
    return runStoreHotKey(library, urls, storeUrl, params);
  },
};

/** One run of the store workload (also bench/scaling.ts's hot-key curve). */
export async function runStoreHotKey(library: LibraryId, urls: readonly string[], storeUrl: string, params: HotKeyShape): Promise<Figures> {
  const { reports, counter } = await runHotKey(library, urls, params, { storeUrl });
  // With a number of cycles, the window is the run: from the start until the last worker is done,
  // or the deadline (durationMs), for a library too slow to finish; only holds begun in it count.
  const deadlineNs = params.durationMs * 1e6;
  const windowNs = params.cycles === undefined ? deadlineNs : Math.min(deadlineNs, Math.max(...reports.map((r) => r.finishedAt)));
  const figures = summarizeMutex(reports, params.processes * params.workersPerProcess, windowNs);
  const holds = reports.reduce((sum, r) => sum + r.holds.length, 0); // every hold, for the counter
  return {
    ...figures,
    throughput: figures.cycles! / (windowNs / 1e9),
    p99OfIdeal: figures.waitP99! / figures.idealWait!,
    lostUpdates: Math.max(0, holds - (counter ?? 0)), // a run cut off may have written without its release answering
    runSeconds: windowNs / 1e9,
  };
}

/**
 * Scenario 3a's share of the limit taken apart: a turn of the lock is a hold and the gap to the
 * next one, and the gaps are of two sorts (to a worker of the same process, to another process).
 * The sum is checked against the measured time per turn, and the target is turned into what a
 * turn to another process may cost at most.
 */
function explainTurns(median: (library: LibraryId, key: string) => number, target: number): string[] {
  const limitTurn = 1000 / median(LIMIT, 'throughput');
  const limitHold = median(LIMIT, 'meanHold');
  const turn = 1000 / median(OURS, 'throughput');
  const hold = median(OURS, 'meanHold');
  const f = median(OURS, 'crossShare');
  const same = median(OURS, 'handoverSame');
  const cross = median(OURS, 'handoverCross');
  const modelled = turnFromParts((key) => median(OURS, key));
  const allowed = limitTurn / target;
  const crossAllowed = (allowed - hold - (1 - f) * same) / f;
  const ms = (value: number) => `${value.toFixed(2)} ms`;
  return [
    `**Where our turn goes.** A turn of the lock is one hold and the gap to the next. The limit's turn: ${ms(limitTurn)} ` +
      `(its hold ${ms(limitHold)}). Ours: ${ms(turn)} measured (the run's length ÷ its holds), against ` +
      `${ms(modelled)} from its parts: the hold, ${ms(hold)} (${ms(hold - limitHold)} longer than the limit's: the same ` +
      'store round trips and timer, run by the lock\'s processes beside the masters on this machine instead of by one), ' +
      `${(100 * (1 - f)).toFixed(0)}% of the turns staying in their process at ${ms(same)} each, ` +
      `and ${(100 * f).toFixed(0)}% going to another process at ${ms(cross)} each (a release, the masters' grant, its message ` +
      `and the waiter's confirmation). The longer hold alone caps the share at ${(limitTurn / hold).toFixed(3)}. ` +
      `A share of ${target} needs a turn of at most ${ms(allowed)}: with this hold and these turns, a turn to another process ` +
      (crossAllowed > 0
        ? `could cost at most ${ms(crossAllowed)}, against the ${ms(cross)} it costs here. `
        : 'would have to cost less than nothing. ') +
      'What that cost is made of, this machine\'s part and the round trips\', is in the scaling section below ' +
      '("Hot key against the number of processes": the turn to another process against the round trip).',
  ];
}
