import { LIBRARIES, LIMIT, OURS, PEERS, type LibraryId } from './adapters/index.js';
import { STARVATION_FACTOR } from './scenarios/hot-key.js';
import type { Results } from './support/results.js';

/** One line of the summary: a figure of ours, the best peer's, and the issue's target for it. */
export interface TargetRow {
  scenario: string;
  figure: string;
  ours: number;
  bestPeer: { library: LibraryId; value: number } | undefined;
  /** ours ÷ best peer, or ours ÷ the target's own reference (shown in `target`). */
  ratio: number;
  target: string;
  /** undefined: the scenario did not run. */
  met: boolean | undefined;
  /** By how much it is met or missed, in words. */
  margin: string;
  digits: number;
}

/** The peer with the best median for `metric`: never ours, the base engine of a side-by-side run included. */
export function bestPeer(results: Results, scenario: string, metric: string, better: 'lower' | 'higher') {
  let best: { library: LibraryId; value: number } | undefined;
  for (const library of PEERS) {
    const value = results.median(scenario, library, metric);
    if (Number.isNaN(value)) continue;
    if (!best || (better === 'lower' ? value < best.value : value > best.value)) best = { library, value };
  }
  return best;
}

const pct = (x: number) => `${(x * 100).toFixed(0)}%`;

/** The targets of issue 6, each judged on the medians of one run. */
export function evaluateTargets(results: Results): TargetRow[] {
  const m = (scenario: string, metric: string) => results.median(scenario, OURS, metric);
  const rows: TargetRow[] = [];
  const ran = (scenario: string) => results.repetitions(scenario, OURS) > 0;
  const row = (r: Omit<TargetRow, 'met'> & { ok: boolean }, scenario: string): void => {
    const { ok, ...rest } = r;
    rows.push({ ...rest, met: ran(scenario) && !Number.isNaN(r.ours) ? ok : undefined });
  };
  /** A figure where lower is better, ours at or below the best peer's; `less` and `more` name the difference. */
  const atMostBestPeer = (scenario: string, figure: string, id: string, metric: string, digits: number, less: string, more: string): void => {
    const ours = m(id, metric);
    const peer = bestPeer(results, id, metric, 'lower');
    const ratio = ours / (peer?.value ?? NaN);
    row({ scenario, figure, ours, bestPeer: peer, ratio, target: '≤ 1.00 × best peer', ok: ratio <= 1, digits,
      margin: ratio <= 1 ? `${pct(1 - ratio)} ${less}` : `${pct(ratio - 1)} ${more} than the best peer` }, id);
  };

  const p50 = m('latency', 'cycleP50');
  const p50Peer = bestPeer(results, 'latency', 'cycleP50', 'lower');
  const p50Ratio = p50 / (p50Peer?.value ?? NaN);
  row({ scenario: '1 one caller', figure: 'acquire+release p50 (ms)', ours: p50, bestPeer: p50Peer, ratio: p50Ratio,
    target: '≤ 1.00 × best peer', ok: p50Ratio <= 1, digits: 3,
    margin: p50Ratio <= 1 ? `${pct(1 - p50Ratio)} faster` : `${pct(p50Ratio - 1)} slower than the best peer` }, 'latency');

  // Issue 32: the early p50 and the CPU per cycle, each at or below the best peer's.
  atMostBestPeer('1 one caller', 'early p50 (ms), a freshly started process', 'latency', 'earlyP50', 3, 'faster', 'slower');
  atMostBestPeer('1 one caller', 'CPU per cycle (µs, user+system)', 'latency', 'cpuPerCycle', 1, 'less CPU', 'more CPU');

  const rate = m('throughput', 'pipelined');
  const ratePeer = bestPeer(results, 'throughput', 'pipelined', 'higher');
  const rateRatio = rate / (ratePeer?.value ?? NaN);
  row({ scenario: '2 200 callers', figure: 'cycles/s, auto-pipelining', ours: rate, bestPeer: ratePeer, ratio: rateRatio,
    target: '≥ 1.50 × best peer', ok: rateRatio >= 1.5, digits: 0,
    margin: rateRatio >= 1.5 ? `${rateRatio.toFixed(2)}×` : `${rateRatio.toFixed(2)}×, ${(1.5 - rateRatio).toFixed(2)}× short` }, 'throughput');
  atMostBestPeer('2 200 callers', 'CPU per cycle (µs, user+system), auto-pipelining', 'throughput', 'cpuPipelined', 1, 'less CPU', 'more CPU');

  const share = m('hot-key', 'insideShare');
  const sharePeer = bestPeer(results, 'hot-key', 'insideShare', 'higher');
  row({ scenario: '3 hot key', figure: 'share of wall time inside the lock', ours: share, bestPeer: sharePeer,
    ratio: share / (sharePeer?.value ?? NaN), target: '≥ 0.80', ok: share >= 0.8, digits: 3,
    margin: share >= 0.8 ? `${(share - 0.8).toFixed(3)} above` : `${(0.8 - share).toFixed(3)} short (${pct(share / 0.8)} of the target)` }, 'hot-key');

  const ideal = m('hot-key', 'idealWait');
  const p99 = m('hot-key', 'waitP99');
  const p99Ratio = p99 / ideal;
  row({ scenario: '3 hot key', figure: `wait p99 (ms), ideal FIFO ${ideal.toFixed(1)} ms`, ours: p99,
    bestPeer: bestPeer(results, 'hot-key', 'waitP99', 'lower'), ratio: p99Ratio, target: '≤ 2 × ideal FIFO wait',
    ok: p99Ratio <= 2, digits: 1, margin: `${p99Ratio.toFixed(1)}× the ideal wait` }, 'hot-key');

  const max = m('hot-key', 'waitMax');
  const failed = m('hot-key', 'failures') + m('hot-key', 'censored');
  const bound = STARVATION_FACTOR * ideal;
  row({ scenario: '3 hot key', figure: 'wait max (ms); failed acquires', ours: max,
    bestPeer: bestPeer(results, 'hot-key', 'waitMax', 'lower'), ratio: max / ideal,
    target: `no starvation: 0 failed or cut off, max ≤ ${STARVATION_FACTOR} × ideal`, ok: failed === 0 && max <= bound, digits: 1,
    margin: `${(max / ideal).toFixed(1)}× the ideal wait; ${failed} failed or cut off` }, 'hot-key');

  const overlaps = LIBRARIES.map((library) => results.median('hot-key', library, 'overlaps'));
  const worst = Math.max(...overlaps.filter((x) => !Number.isNaN(x)));
  row({ scenario: '3 hot key', figure: 'overlapping holds (any library)', ours: m('hot-key', 'overlaps'),
    bestPeer: undefined, ratio: NaN, target: '0 (mutual exclusion)', ok: m('hot-key', 'overlaps') === 0, digits: 0,
    margin: `ours ${m('hot-key', 'overlaps')}, worst library ${worst}` }, 'hot-key');

  // Issue 17's target, on its own workload (scenario 3a: 4 x 5 workers, 40 cycles, 2 ms + two store round trips).
  const store = 'hot-key-store';
  const storeLimit = results.median(store, LIMIT, 'throughput');
  const storeShare = m(store, 'throughput') / storeLimit;
  const storePeer = bestPeer(results, store, 'throughput', 'higher');
  const storePeerShare = (storePeer?.value ?? NaN) / storeLimit;
  row({ scenario: '3a hot key + store', figure: 'holds/s, share of the limit (perfect in-process mutex)', ours: storeShare,
    bestPeer: storePeer && { library: storePeer.library, value: storePeerShare }, ratio: storeShare / storePeerShare,
    target: '≥ 0.85 of the limit', ok: storeShare >= 0.85, digits: 3,
    margin: storeShare >= 0.85 ? `${(storeShare - 0.85).toFixed(3)} above` : `${(0.85 - storeShare).toFixed(3)} short` }, store);

  const storeP99 = m(store, 'p99OfIdeal');
  row({ scenario: '3a hot key + store', figure: `wait p99 ÷ ideal FIFO wait (ideal ${m(store, 'idealWait').toFixed(1)} ms)`, ours: storeP99,
    bestPeer: bestPeer(results, store, 'p99OfIdeal', 'lower'), ratio: storeP99, target: '≤ 1.5', ok: storeP99 <= 1.5, digits: 2,
    margin: `${storeP99.toFixed(2)}× the ideal wait` }, store);

  const broken = (library: LibraryId) => results.median(store, library, 'overlaps') + results.median(store, library, 'lostUpdates');
  const worstStore = Math.max(...LIBRARIES.map(broken).filter((x) => !Number.isNaN(x)));
  row({ scenario: '3a hot key + store', figure: 'overlapping holds + lost updates (any library)', ours: broken(OURS),
    bestPeer: undefined, ratio: NaN, target: '0 (mutual exclusion)', ok: broken(OURS) === 0, digits: 0,
    margin: `ours ${broken(OURS)}, worst library ${worstStore}` }, store);

  // Issue 32: permits and shared holds against the perfect in-process semaphore / read-write lock.
  const sem = 'hot-semaphore';
  const semLimit = results.median(sem, LIMIT, 'throughput');
  const semShare = m(sem, 'throughput') / semLimit;
  const semPeer = bestPeer(results, sem, 'throughput', 'higher');
  const semRatio = m(sem, 'throughput') / (semPeer?.value ?? NaN);
  row({ scenario: '3b hot semaphore', figure: 'holds/s, share of the limit (perfect in-process semaphore)', ours: semShare,
    bestPeer: semPeer && { library: semPeer.library, value: semPeer.value / semLimit }, ratio: semRatio,
    target: '≥ 0.60 of the limit', ok: semShare >= 0.6, digits: 3,
    margin: semShare >= 0.6 ? `${(semShare - 0.6).toFixed(3)} above` : `${(0.6 - semShare).toFixed(3)} short` }, sem);
  row({ scenario: '3b hot semaphore', figure: 'holds/s', ours: m(sem, 'throughput'), bestPeer: semPeer, ratio: semRatio,
    target: '≥ 1.00 × best peer', ok: semRatio >= 1, digits: 0,
    margin: semRatio >= 1 ? `${pct(semRatio - 1)} more` : `${pct(1 - semRatio)} fewer than the best peer` }, sem);
  const mostAtOnce = (library: LibraryId) => results.max(sem, library, 'mostAtOnce');
  const semPeers = PEERS.filter((library) => !Number.isNaN(mostAtOnce(library)));
  // The perfect semaphore fills its permits: its most at once is the limit.
  const permits = mostAtOnce(LIMIT);
  row({ scenario: '3b hot semaphore', figure: `most holders at once, limit ${permits} (any repetition)`, ours: mostAtOnce(OURS), bestPeer: undefined,
    ratio: NaN, target: '≤ the limit', ok: mostAtOnce(OURS) <= permits, digits: 0,
    margin: `ours ${mostAtOnce(OURS)}; ${semPeers.map((library) => `${library} ${mostAtOnce(library)}`).join(', ') || 'no peer ran'}` }, sem);
  // Issue 34: the weighted variant of 3b (1 to 3 permits of 8 per acquire).
  const weighted = 'hot-weighted-semaphore';
  const weightedShare = m(weighted, 'throughput') / results.median(weighted, LIMIT, 'throughput');
  const weightedPeer = bestPeer(results, weighted, 'throughput', 'higher');
  row({ scenario: '3b-w weighted semaphore', figure: 'holds/s, share of the limit (perfect in-process weighted semaphore)', ours: weightedShare,
    bestPeer: weightedPeer && { library: weightedPeer.library, value: weightedPeer.value / results.median(weighted, LIMIT, 'throughput') },
    ratio: m(weighted, 'throughput') / (weightedPeer?.value ?? NaN), target: '≥ 0.60 of the limit', ok: weightedShare >= 0.6, digits: 3,
    margin: weightedShare >= 0.6 ? `${(weightedShare - 0.6).toFixed(3)} above` : `${(0.6 - weightedShare).toFixed(3)} short` }, weighted);
  const mostPermits = (library: LibraryId) => results.max(weighted, library, 'mostAtOnce');
  const weightedLimit = mostPermits(LIMIT);
  const weightedPeers = PEERS.filter((library) => !Number.isNaN(mostPermits(library)));
  row({ scenario: '3b-w weighted semaphore', figure: `most permits held at once, limit ${weightedLimit} (any repetition)`, ours: mostPermits(OURS),
    bestPeer: undefined, ratio: NaN, target: '≤ the limit', ok: mostPermits(OURS) <= weightedLimit, digits: 0,
    margin: `ours ${mostPermits(OURS)}; ${weightedPeers.map((library) => `${library} ${mostPermits(library)}`).join(', ') || 'no peer ran'}` }, weighted);
  for (const [id, label] of [['rw-read-heavy', '3c read-heavy'], ['rw-write-heavy', '3d write-heavy']] as const) {
    const rwShare = m(id, 'throughput') / results.median(id, LIMIT, 'throughput');
    const writeWait = m(id, 'writeWaitP99');
    const limitWriteWait = results.median(id, LIMIT, 'writeWaitP99');
    row({ scenario: label, figure: 'holds/s, share of the limit (perfect in-process read-write lock)', ours: rwShare, bestPeer: undefined,
      ratio: NaN, target: '≥ 0.60 of the limit, writers not starved', ok: rwShare >= 0.6 && m(id, 'censored') === 0 && m(id, 'failures') === 0, digits: 3,
      margin: `${rwShare >= 0.6 ? `${(rwShare - 0.6).toFixed(3)} above` : `${(0.6 - rwShare).toFixed(3)} short`}; write wait p99 ${writeWait.toFixed(1)} ms (the limit's ${limitWriteWait.toFixed(1)} ms), ${m(id, 'censored')} cut off` }, id);
  }

  const overhead = m('decorator', 'overhead');
  row({ scenario: '4 @WithLock route', figure: 'req/s overhead vs hand-written using (%)', ours: overhead * 100, bestPeer: undefined,
    ratio: NaN, target: '≤ 10%', ok: overhead <= 0.1, digits: 1,
    margin: overhead >= 0 ? `the decorated route ${(overhead * 100).toFixed(1)}% slower` : `the decorated route ${(-overhead * 100).toFixed(1)}% faster` }, 'decorator');

  const growth = m('memory', 'growthMB');
  const cycles = m('memory', 'cycles').toLocaleString('en');
  const peerCycles = results.median('memory', 'redlock', 'cycles').toLocaleString('en');
  row({ scenario: '5 memory', figure: `heap growth (MB), ours over ${cycles} cycles, peers over ${peerCycles}`, ours: growth,
    bestPeer: bestPeer(results, 'memory', 'growthCheckpointMB', 'lower'), ratio: NaN, target: '< 10 MB',
    ok: growth < 10, digits: 2, margin: growth < 10 ? `${(10 - growth).toFixed(1)} MB to spare` : `${(growth - 10).toFixed(1)} MB over` }, 'memory');
  return rows;
}
