import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { RedisFleet } from '../test/support/redis-fleet.js';
import { connectMasters, disconnectAll } from '../test/support/masters.js';
import { createAdapter, LIBRARIES, LIMIT, OURS, PEERS, type LibraryId } from './adapters/index.js';
import { fmt, SCALING_MARKERS, utcMinute, withSection } from './report.js';
import type { LatencyJob, LatencyPoint } from './scaling-latency.js';
import { runStoreHotKey } from './scenarios/hot-key-store.js';
import { turnFromParts } from './scenarios/hot-key-run.js';
import type { Figures } from './scenarios/scenario.js';
import { type Chart, chartsDirFor, imageLink, writeCharts } from './support/charts.js';
import { DelayProxy, type ProxyStats } from './support/delay-proxy.js';
import { describeMachine, engineSource } from './support/machine.js';
import { FLEET_SETTLE_MS, runInChild } from './support/measure.js';
import {
  CHART_NAMES,
  type Curve,
  hotKeyChart,
  hotKeyCostChart,
  latencyRttChart,
  LIMIT_CURVE,
  mastersChart,
  mastersPanel,
  processesPanel,
  type ScalingSource,
  spread,
} from './support/scaling-charts.js';
import { ascending, linearFit, median, percentile } from './support/stats.js';

/**
 * `npm run bench:scaling [-- --smoke] [-- --reps N] [-- --only proxy,latency,hot-key] [-- --out FILE]`:
 * how the costs grow with the deployment, each curve beside the best peer, at round-trip times of
 * 0, 0.5 and 2 ms (loopback hides what batching saves on a real network, so 0.5 and 2 ms go
 * through bench/support/delay-proxy.c; 0 ms is the direct path):
 * - acquire + release p50 and p99 against the number of masters (1, 3, 5, 7), one caller, every library;
 * - scenario 3a's hot key (5 workers a process, 2 ms + two store round trips) as a share of the
 *   limit (a perfect in-process mutex) against the number of processes (1, 2, 4, 8), ours beside
 *   redis-semaphore, the best peer of scenarios 3 and 3a (the redlock packages starve there);
 * - the proxy's own cost: the direct path against the proxy at 0 ms, and its CPU.
 * Fits a line to each curve and says how each cost grows. A full run (2 repetitions) takes about
 * 9 minutes on 2 cores and writes its section of bench/RESULTS.md (between the scaling markers,
 * which the full benchmark keeps); `--reps 1` halves it; `--smoke` takes about 1.5 minutes.
 */
const { values: args } = parseArgs({
  options: {
    smoke: { type: 'boolean', default: false },
    reps: { type: 'string' },
    only: { type: 'string' },
    out: { type: 'string' },
  },
});
const mode = args.smoke ? 'smoke' : 'full';
const reps = Number(args.reps ?? (args.smoke ? 1 : 2));
const parts = new Set(args.only ? args.only.split(',') : ['proxy', 'latency', 'hot-key']);
const official = !args.smoke && !args.only && !args.out;
const RESULTS = fileURLToPath(new URL('./RESULTS.md', import.meta.url));
const out = args.out ?? (official ? RESULTS : join(tmpdir(), `nestjs-redlock-bench-scaling-${mode}.md`));
const LATENCY_CHILD = fileURLToPath(new URL('./scaling-latency.ts', import.meta.url));

const PARAMS = {
  full: {
    rtts: [0, 0.5, 2],
    masters: [1, 3, 5, 7],
    processes: [1, 2, 4, 8],
    /** Per round-trip time, cycles per block: about 0.1 s a block whatever the delay. */
    /** Warm-up as scenario 1's (3,000 cycles), spread over the numbers of masters: fewer leave our code half-optimised. */
    latency: { warmup: 3_000, blocks: 8, cyclesPerBlock: [120, 50, 20], ttlMs: 10_000 },
    hotKey: { workersPerProcess: 5, holdMs: 2, durationMs: 2_000, graceMs: 2_000, ttlMs: 10_000 },
    proxy: { pingBlocks: 8, pingsPerBlock: [250, 150, 50], blocks: 8, cyclesPerBlock: 150 },
  },
  smoke: {
    rtts: [0, 0.5, 2],
    masters: [1, 3],
    processes: [1, 2],
    latency: { warmup: 100, blocks: 2, cyclesPerBlock: [20, 10, 5], ttlMs: 10_000 },
    hotKey: { workersPerProcess: 5, holdMs: 2, durationMs: 400, graceMs: 500, ttlMs: 10_000 },
    proxy: { pingBlocks: 2, pingsPerBlock: [50, 20, 10], blocks: 2, cyclesPerBlock: 20 },
  },
}[mode];
const MAX_MASTERS = Math.max(...PARAMS.masters);
/** The hot-key curve's masters and the proxy-cost runs', as in the main benchmark (fewer in a smoke run). */
const HOT_KEY_MASTERS = Math.min(5, MAX_MASTERS);
const HOT_KEY_PEER: LibraryId = 'redis-semaphore';
const HOT_KEY_LIBRARIES: readonly LibraryId[] = [OURS, HOT_KEY_PEER, LIMIT];

interface Ping {
  directP50: number;
  directP99: number;
  proxyP50: number;
  proxyP99: number;
  latenessUs: number;
}
interface ProxyLoad {
  phase: string;
  rtt: number;
  cpuS: number;
  wallS: number;
  chunks: number;
  /** Mean lateness of the chunks it delayed in this phase (µs after their due time). */
  latenessUs: number;
}

const started = Date.now();
const loadAtStart = loadavg()[0]!;
const engine = engineSource();
/** Per RTT index: one Ping per repetition. */
const pings: Ping[][] = PARAMS.rtts.map(() => []);
/** Ours at 5 masters, direct and through the proxy at 0 ms: one pair per repetition. */
const proxyCycles: [LatencyPoint, LatencyPoint][] = [];
const proxyLoads: ProxyLoad[] = [];
/** latency[library][rtt index]: per repetition, one point per number of masters. */
const latency = new Map<LibraryId, LatencyPoint[][][]>();
/** hotKey[library][rtt index][processes index]: one Figures per repetition. */
const hotKey = new Map<LibraryId, Figures[][][]>();
const failures: string[] = [];
/** The scheduling the proxy obtained (bench/support/delay-proxy.c). */
let scheduling: ProxyStats['scheduling'] | undefined;

const fleet = await RedisFleet.start(MAX_MASTERS + 1);
const direct = fleet.urls();
const proxy = await DelayProxy.start(direct);
scheduling = (await proxy.stats()).scheduling;
try {
  await sleep(FLEET_SETTLE_MS);
  const admin = await connectMasters(direct);
  const attempt = async (label: string, run: () => Promise<string>) => {
    try {
      console.log(`${label}: ${await run()}`);
    } catch (error) {
      failures.push(`${label}: ${(error as Error).message}`);
      console.error(`${label}: FAILED ${(error as Error).message}`);
    }
    await Promise.all(admin.map((client) => client.flushall()));
  };
  /** The masters and the store at `rtt`: the direct path at 0, else the proxy's ports, set to `rtt`. */
  const at = async (rtt: number) => {
    await proxy.setRttMs(rtt);
    const urls = rtt === 0 ? direct : proxy.urls;
    return { masters: urls.slice(0, MAX_MASTERS), store: urls[MAX_MASTERS]! };
  };
  /** Runs `work` with the proxy's CPU and traffic over it recorded as `phase`. */
  const metered = async (phase: string, rtt: number, work: () => Promise<void>) => {
    const [cpu, stats, wall] = [proxy.cpuSeconds(), await proxy.stats(), performance.now()];
    await work();
    const after = await proxy.stats();
    proxyLoads.push({
      phase,
      rtt,
      cpuS: proxy.cpuSeconds() - cpu,
      wallS: (performance.now() - wall) / 1000,
      chunks: after.chunks - stats.chunks,
      latenessUs: meanLatenessBetween(stats, after),
    });
  };

  for (let rep = 0; rep < reps; rep++) {
    const tag = `[rep ${rep + 1}/${reps}]`;
    if (parts.has('proxy')) {
      for (const [r, rtt] of PARAMS.rtts.entries()) {
        await attempt(`${tag} proxy ping ${rtt} ms`, async () => {
          await proxy.setRttMs(rtt);
          const ping = await measurePings(direct[MAX_MASTERS]!, proxy, PARAMS.proxy.pingBlocks, PARAMS.proxy.pingsPerBlock[r]!);
          pings[r]!.push(ping);
          return JSON.stringify(ping);
        });
      }
      await attempt(`${tag} proxy cost, ${OURS} at ${HOT_KEY_MASTERS} masters`, async () => {
        await proxy.setRttMs(0);
        const [viaDirect, viaProxy] = await latencyChild(OURS, [
          { masters: HOT_KEY_MASTERS, urls: direct },
          { masters: HOT_KEY_MASTERS, urls: proxy.urls },
        ], PARAMS.proxy.blocks, PARAMS.proxy.cyclesPerBlock);
        proxyCycles.push([viaDirect!, viaProxy!]);
        return `direct ${viaDirect!.cycleP50.toFixed(3)} ms, proxy ${viaProxy!.cycleP50.toFixed(3)} ms`;
      });
    }
    if (parts.has('latency')) {
      for (const [r, rtt] of PARAMS.rtts.entries()) {
        const { masters } = await at(rtt);
        await metered('acquire + release, every library in turn', rtt, async () => {
          for (const library of rotate(LIBRARIES, rep)) {
            await attempt(`${tag} latency ${rtt} ms / ${library}`, async () => {
              const targets = PARAMS.masters.map((count) => ({ masters: count, urls: masters }));
              const points = await latencyChild(library, targets, PARAMS.latency.blocks, PARAMS.latency.cyclesPerBlock[r]!);
              slot(latency, library, r).push(points);
              return points.map((p, i) => `${PARAMS.masters[i]}: ${p.cycleP50.toFixed(3)}`).join(', ');
            });
          }
        });
      }
    }
    if (parts.has('hot-key')) {
      for (const [r, rtt] of PARAMS.rtts.entries()) {
        const { masters, store } = await at(rtt);
        await metered(`hot key, ${HOT_KEY_MASTERS} masters`, rtt, async () => {
          for (const [p, processes] of PARAMS.processes.entries()) {
            for (const library of rotate(HOT_KEY_LIBRARIES, rep)) {
              await attempt(`${tag} hot key ${rtt} ms / ${processes} processes / ${library}`, async () => {
                const shape = { ...PARAMS.hotKey, processes };
                const figures = await runStoreHotKey(library, masters.slice(0, HOT_KEY_MASTERS), store, shape);
                const runs = slot(hotKey, library, r);
                (runs[p] ??= []).push(figures);
                return `holds/s ${figures.throughput!.toFixed(0)}, p99 ÷ ideal ${figures.p99OfIdeal!.toFixed(2)}, overlaps ${figures.overlaps}`;
              });
            }
          }
        });
      }
    }
  }
  disconnectAll(admin);
} finally {
  proxy.close();
  await fleet.stopAll();
}

const when = utcMinute();
// The sweeps as line charts beside the report (bench/charts/ for the official run); one that fails costs its image only.
const chartsDir = chartsDirFor(out, official);
const images = new Map<string, string>();
try {
  const charts = sweepCharts();
  await writeCharts(chartsDir, charts);
  for (const chart of charts) images.set(chart.name, imageLink(chart, chartsDir, out));
} catch (error) {
  console.error(`charts: FAILED ${(error as Error).message}`);
}
const section = render();
if (official) writeFileSync(out, withSection(existsSync(out) ? readFileSync(out, 'utf8') : '', section, SCALING_MARKERS));
else writeFileSync(out, `${section}\n`);
console.log(`\n${section}\n\nwrote ${out}${images.size ? `, ${images.size} chart(s) in ${chartsDir}` : ''}`);

function latencyChild(library: LibraryId, targets: LatencyJob['targets'], blocks: number, cyclesPerBlock: number): Promise<LatencyPoint[]> {
  const job: LatencyJob = { library, directUrls: direct.slice(0, MAX_MASTERS), targets, warmup: PARAMS.latency.warmup, blocks, cyclesPerBlock, ttlMs: PARAMS.latency.ttlMs };
  return runInChild<LatencyPoint[]>(LATENCY_CHILD, job);
}

/** PING round trips to one server, direct and through the proxy, in alternating blocks. */
async function measurePings(url: string, through: DelayProxy, blocks: number, perBlock: number): Promise<Ping> {
  const clients = [new Redis(url), new Redis(through.urls[direct.indexOf(url)]!)];
  const times: number[][] = [[], []];
  const before = await through.stats();
  try {
    for (const client of clients) for (let i = 0; i < 20; i++) await client.ping();
    for (let block = 0; block < blocks; block++) {
      for (const [i, client] of clients.entries()) {
        for (let n = 0; n < perBlock; n++) {
          const start = performance.now();
          await client.ping();
          times[i]!.push(performance.now() - start);
        }
      }
    }
  } finally {
    disconnectAll(clients);
  }
  const after = await through.stats();
  const [d, p] = times.map(ascending) as [number[], number[]];
  return {
    directP50: percentile(d, 50),
    directP99: percentile(d, 99),
    proxyP50: percentile(p, 50),
    proxyP99: percentile(p, 99),
    latenessUs: meanLatenessBetween(before, after),
  };
}

/** The mean lateness of the chunks delayed between two readings of the proxy's stats. */
function meanLatenessBetween(before: ProxyStats, after: ProxyStats): number {
  const delayed = after.delayed - before.delayed;
  return delayed ? (after.meanLatenessUs * after.delayed - before.meanLatenessUs * before.delayed) / delayed : 0;
}

function slot<T>(map: Map<LibraryId, T[][]>, library: LibraryId, r: number): T[] {
  const byRtt = map.get(library) ?? PARAMS.rtts.map(() => []);
  map.set(library, byRtt);
  return byRtt[r]!;
}

function rotate<T>(list: readonly T[], by: number): T[] {
  const shift = by % list.length;
  return [...list.slice(shift), ...list.slice(0, shift)];
}

// ---------------------------------------------------------------------------------------------
// The charts (bench/support/scaling-charts.ts): medians, whiskers over the repetitions

function sweepCharts(): Chart[] {
  const source: ScalingSource = { when, mode, reps };
  const charts: Chart[] = [];
  const measured = (r: number) => LIBRARIES.filter((library) => latency.get(library)?.[r]?.length);
  for (const [r, rtt] of PARAMS.rtts.entries()) {
    if (!latency.get(OURS)?.[r]?.length) continue;
    charts.push(
      mastersChart(rtt, source, measured(r).map((library) => ({
        name: name(library),
        ours: library === OURS,
        points: PARAMS.masters.map((masters, i) => ({
          x: masters,
          y: latencyCurve(library, r, 'cycleP50')[i]!,
          ...spread((latency.get(library)?.[r] ?? []).map((points) => points[i]?.cycleP50 ?? Number.NaN)),
        })),
      }))),
    );
  }
  if (PARAMS.rtts.filter((_, r) => latency.get(OURS)?.[r]?.length).length > 1) {
    const libraries = LIBRARIES.filter((library) => latency.has(library));
    charts.push(
      latencyRttChart(source, libraries.map((library) => ({
        name: name(library),
        ours: library === OURS,
        points: PARAMS.rtts.flatMap((rtt, r) =>
          latency.get(library)?.[r]?.length
            ? PARAMS.masters.map((masters, i) => ({ panel: mastersPanel(masters), x: rtt, y: latencyCurve(library, r, 'cycleP50')[i]! }))
            : [],
        ),
      }))),
    );
  }
  const hotKeyCurve = (library: LibraryId, points: Curve['points']): Curve => ({
    name: library === LIMIT ? LIMIT_CURVE : name(library),
    ours: library === OURS,
    reference: library === LIMIT,
    points,
  });
  for (const [r, rtt] of PARAMS.rtts.entries()) {
    if (!hotKey.get(OURS)?.[r]?.length) continue;
    charts.push(
      hotKeyChart(rtt, source, HOT_KEY_LIBRARIES.filter((library) => hotKey.get(library)?.[r]?.length).map((library) =>
        hotKeyCurve(library, PARAMS.processes.map((processes, p) => ({
          x: processes,
          y: hotKeyFigure(library, r, p, 'throughput'),
          ...spread((hotKey.get(library)?.[r]?.[p] ?? []).map((figures) => figures['throughput'] ?? Number.NaN)),
        }))),
      )),
    );
  }
  if (PARAMS.rtts.filter((_, r) => hotKey.get(OURS)?.[r]?.length).length > 1) {
    charts.push(
      hotKeyCostChart(source, [OURS, HOT_KEY_PEER].filter((library) => hotKey.has(library)).map((library) =>
        hotKeyCurve(library, PARAMS.processes.flatMap((processes, p) =>
          PARAMS.rtts.map((rtt, r) => ({ panel: processesPanel(processes), x: rtt, y: turnCost(library, r, p) })),
        )),
      )),
    );
  }
  return charts;
}

/** The Markdown image of the chart named so, and a blank line; nothing if it was not drawn. */
function image(chartName: string): string[] {
  const link = images.get(chartName);
  return link ? [link, ''] : [];
}

/** 1 ÷ holds/s − 1 ÷ the limit's, in ms: what a cross-process hand-over adds to every critical section. */
function turnCost(library: LibraryId, r: number, p: number): number {
  return 1000 / hotKeyFigure(library, r, p, 'throughput') - 1000 / hotKeyFigure(LIMIT, r, p, 'throughput');
}

// ---------------------------------------------------------------------------------------------
// The section

/** Median over the repetitions of one latency figure, per number of masters. */
function latencyCurve(library: LibraryId, r: number, figure: keyof LatencyPoint): number[] {
  const runs = latency.get(library)?.[r] ?? [];
  return PARAMS.masters.map((_, i) => median(runs.map((points) => points[i]?.[figure] ?? Number.NaN)));
}

function hotKeyFigure(library: LibraryId, r: number, p: number, figure: string): number {
  return median((hotKey.get(library)?.[r]?.[p] ?? []).map((figures) => figures[figure] ?? Number.NaN));
}

/** The peer with the lowest cycle p50 at this round-trip time, over all numbers of masters. */
function bestLatencyPeer(r: number): LibraryId | undefined {
  const peers = PEERS.filter((library) => latency.has(library));
  const score = (library: LibraryId) => latencyCurve(library, r, 'cycleP50').reduce((sum, x) => sum + x, 0);
  return peers.filter((library) => Number.isFinite(score(library))).sort((a, b) => score(a) - score(b))[0];
}

function name(library: LibraryId): string {
  return createAdapter(library).name;
}

/** A time in ms, shown in whole µs. */
function us(ms: number): string {
  return fmt(ms * 1000, 0);
}

/** "a ms + b µs × N" for a line fitted in ms. */
function line(fit: { intercept: number; slope: number; r2: number }, unit: string): string {
  return `${fmt(fit.intercept, 3)} ms ${signed(fit.slope, ` × ${unit}`)} (r² ${fmt(fit.r2, 2)})`;
}

/** "+ 12 µs" or "− 12 µs" for a time in ms. */
function signed(ms: number, after = ''): string {
  return `${ms < 0 ? '−' : '+'} ${fmt(Math.abs(ms) * 1000, 1)} µs${after}`;
}

function render(): string {
  const machine = describeMachine();
  const end = engineSource();
  const h = PARAMS.hotKey;
  return [
    SCALING_MARKERS[0],
    '## Scaling: masters, processes and round-trip time',
    '',
    `Written by \`npm run bench:scaling\` (bench/scaling.ts) on ${when} UTC: ${mode} run${args.only ? ` (only ${args.only})` : ''}, ` +
      `${reps} repetition(s), each figure the median of the repetitions; ${((Date.now() - started) / 60_000).toFixed(1)} min. ` +
      (end.digest === engine.digest ? `${engine.label}.` : `lib/ changed during the run: ${engine.label} at the start, ${end.label} at the end.`),
    '',
    `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, ${machine.os}, Node ${machine.node}, ` +
      `redis-server ${machine.redis}; load average (1 min) ${loadAtStart.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after.`,
    '',
    `${MAX_MASTERS} local redis-server masters and one more as the store, started once. Round-trip times above 0 go through ` +
      'bench/support/delay-proxy.c, one process in C (epoll, one timerfd) that holds every chunk it reads for half the ' +
      'round trip, each way, in the order read: a wire with a fixed latency. 0 ms is the direct path (loopback).',
    '',
    ...proxySection(),
    ...latencySection(),
    ...hotKeySection(h),
    ...(failures.length ? ['Failed runs:', '', ...failures.map((failure) => `- ${failure}`), ''] : []),
    SCALING_MARKERS[1],
  ].join('\n');
}

function proxySection(): string[] {
  if (!pings.some((runs) => runs.length) && !proxyLoads.length) return [];
  const rows = PARAMS.rtts.flatMap((rtt, r) => {
    const runs = pings[r]!;
    if (!runs.length) return [];
    const m = (key: keyof Ping) => median(runs.map((ping) => ping[key]));
    return [`| ${rtt} | ${us(m('directP50'))} / ${us(m('directP99'))} | ${us(m('proxyP50'))} / ${us(m('proxyP99'))} | ${us(m('proxyP50') - m('directP50'))} | ${fmt(m('latenessUs'), 1)} |`];
  });
  const cycles = proxyCycles.length
    ? (() => {
        const d = median(proxyCycles.map(([a]) => a.cycleP50));
        const p = median(proxyCycles.map(([, b]) => b.cycleP50));
        const dp99 = median(proxyCycles.map(([a]) => a.cycleP99));
        const pp99 = median(proxyCycles.map(([, b]) => b.cycleP99));
        return [
          `Our acquire + release at ${HOT_KEY_MASTERS} masters, one process taking turns between the direct path and the proxy at 0 ms ` +
            `(${PARAMS.proxy.blocks} blocks of ${PARAMS.proxy.cyclesPerBlock} cycles each): p50 ${fmt(d, 3)} ms direct, ${fmt(p, 3)} ms through ` +
            `the proxy (${p >= d ? '+' : '−'}${us(Math.abs(p - d))} µs, ${fmt((p / d - 1) * 100, 0)}%); p99 ${fmt(dp99, 3)} against ${fmt(pp99, 3)} ms. ` +
            'That is the proxy\'s own cost per cycle, included in every figure at 0.5 and 2 ms below (not in those at 0 ms).',
          '',
        ];
      })()
    : [];
  const loads = proxyLoads.map(
    (load) =>
      `| ${load.phase} | ${load.rtt} | ${fmt((load.cpuS / load.wallS) * 100, 1)}% | ${fmt(load.chunks / load.wallS, 0)} | ` +
      `${load.chunks ? fmt((load.cpuS / load.chunks) * 1e6, 1) : '–'} | ${load.rtt ? fmt(load.latenessUs, 1) : '–'} |`,
  );
  return [
    '### The delay proxy',
    '',
    'PING round trips to the store, one client direct and one through the proxy, in alternating blocks; lateness = how ' +
      'long after its due time the proxy let a delayed chunk go, on average (it learns how late its timer wakes and sets ' +
      'it that much early).',
    '',
    '| round trip set (ms) | PING p50 / p99 direct (µs) | PING p50 / p99 through the proxy (µs) | added p50 (µs) | proxy lateness (µs) |',
    '|---|---|---|---|---|',
    ...rows,
    '',
    ...cycles,
    'The proxy\'s CPU (user + system, from /proc, 10 ms ticks) during each part of the run, as a share of one core, ' +
      'beside the chunks it forwarded and how late it let the delayed ones go (at 0 ms nothing passes through it). ' +
      `Its scheduling: ${scheduling === 'fifo' ? 'real-time (SCHED_FIFO 1)' : scheduling === 'nice' ? 'a raised priority (nice -10)' : 'ordinary (no higher priority allowed)'}.`,
    '',
    '| part | round trip (ms) | proxy CPU (% of a core) | chunks/s | CPU per chunk (µs) | lateness (µs) |',
    '|---|---|---|---|---|---|',
    ...loads,
    '',
  ];
}

function latencySection(): string[] {
  if (!latency.size) return [];
  const p = PARAMS.latency;
  const lines: string[] = [
    '### Acquire + release against the number of masters',
    '',
    `One caller, acquire + release on a new key each (scenario 1), ttl ${p.ttlMs} ms, no auto-pipelining, every library in ` +
      `a fresh process: ${p.warmup} warm-up cycles on the direct path first (V8 optimises the same code whatever the delay), ` +
      `then ${p.blocks} blocks per number of masters (${PARAMS.masters.join(', ')}), taking turns, of ` +
      `${PARAMS.rtts.map((rtt, r) => `${p.cyclesPerBlock[r]} cycles at ${rtt} ms`).join(', ')}. CPU per cycle is the process's own ` +
      '(user + system). The best peer is the one with the lowest p50 summed over the numbers of masters at that round trip.',
    '',
  ];
  for (const [r, rtt] of PARAMS.rtts.entries()) {
    if (!latency.get(OURS)?.[r]?.length) continue;
    const peer = bestLatencyPeer(r);
    const ours = (figure: keyof LatencyPoint) => latencyCurve(OURS, r, figure);
    const theirs = (figure: keyof LatencyPoint) => (peer ? latencyCurve(peer, r, figure) : PARAMS.masters.map(() => Number.NaN));
    lines.push(
      `**Round trip ${rtt} ms**${peer ? `, best peer ${name(peer)}` : ''}:`,
      '',
      '| masters | ours p50 / p99 (ms) | ours acquire p50 / p99 (ms) | ours CPU per cycle (µs) | best peer p50 / p99 (ms) | best peer acquire p50 (ms) | best peer CPU per cycle (µs) | p50 ours ÷ best peer |',
      '|---|---|---|---|---|---|---|---|',
      ...PARAMS.masters.map(
        (count, i) =>
          `| ${count} | ${fmt(ours('cycleP50')[i]!, 3)} / ${fmt(ours('cycleP99')[i]!, 3)} | ${fmt(ours('acquireP50')[i]!, 3)} / ${fmt(ours('acquireP99')[i]!, 3)} | ` +
          `${fmt(ours('cpuUsPerCycle')[i]!, 0)} | ${fmt(theirs('cycleP50')[i]!, 3)} / ${fmt(theirs('cycleP99')[i]!, 3)} | ${fmt(theirs('acquireP50')[i]!, 3)} | ` +
          `${fmt(theirs('cpuUsPerCycle')[i]!, 0)} | ${fmt(ours('cycleP50')[i]! / theirs('cycleP50')[i]!, 2)} |`,
      ),
      '',
      'Every library, cycle p50 (ms) by number of masters:',
      '',
      `| library | ${PARAMS.masters.join(' | ')} |`,
      `|---|${PARAMS.masters.map(() => '---').join('|')}|`,
      ...LIBRARIES.filter((library) => latency.get(library)?.[r]?.length).map(
        (library) => `| ${library === OURS ? `**${name(library)}**` : name(library)} | ${latencyCurve(library, r, 'cycleP50').map((x) => fmt(x, 3)).join(' | ')} |`,
      ),
      '',
      ...image(CHART_NAMES.masters(rtt)),
      ...[OURS, ...(peer ? [peer] : [])].map((library) => `- ${name(library)}: ${growth(library, r, rtt)}`),
      '',
    );
  }
  lines.push(...image(CHART_NAMES.latencyRtt));
  return lines;
}

/** How one library's latency grows with the number of masters at one round-trip time, from fitted lines. */
function growth(library: LibraryId, r: number, rtt: number): string {
  const fit = (figure: keyof LatencyPoint) => linearFit(PARAMS.masters, latencyCurve(library, r, figure));
  const acquire = fit('acquireP50');
  const cpu = fit('cpuUsPerCycle');
  const ping = median((pings[r] ?? []).map((p) => (rtt === 0 ? p.directP50 : p.proxyP50)));
  const fixed = Number.isFinite(ping)
    ? `: one measured round trip (PING p50 ${fmt(ping, 3)} ms) ${signed(acquire.intercept - ping)} + ${fmt(acquire.slope * 1000, 1)} µs per master`
    : '';
  return (
    `cycle p50 ≈ ${line(fit('cycleP50'), 'masters')}; p99 ≈ ${line(fit('cycleP99'), 'masters')}; ` +
    `acquire p50 ≈ ${line(acquire, 'masters')}${fixed}; CPU per cycle ≈ ${fmt(cpu.intercept, 0)} µs ${signed(cpu.slope / 1000, ' × masters')}.`
  );
}

function hotKeySection(h: (typeof PARAMS)['hotKey']): string[] {
  if (!hotKey.size) return [];
  const lines: string[] = [
    '### Hot key against the number of processes',
    '',
    `Scenario 3a's workload on ${HOT_KEY_MASTERS} masters: N processes x ${h.workersPerProcess} workers on one key, each hold a GET from the store, ` +
      `\`setTimeout(${h.holdMs})\` and a SET (the store behind the same round trip), for a window of ${h.durationMs / 1000} s ` +
      `(waits still open ${h.graceMs / 1000} s after it are cut off). The limit: the same workers in ONE process around a ` +
      `perfect in-process FIFO mutex. Share = holds/s ÷ the limit's at the same round trip and number of workers. Cost per ` +
      'turn = 1 ÷ holds/s − 1 ÷ the limit\'s: what a cross-process hand-over adds to every critical section. ' +
      `${name(HOT_KEY_PEER)} is the best peer of scenarios 3 and 3a.`,
    '',
  ];
  const cost = turnCost;
  for (const [r, rtt] of PARAMS.rtts.entries()) {
    if (!hotKey.get(OURS)?.[r]?.length) continue;
    lines.push(
      `**Round trip ${rtt} ms:**`,
      '',
      '| processes | the limit, holds/s | ours holds/s | ours share of the limit | ours p99 ÷ ideal FIFO | ours cost per turn (ms) | peer holds/s | peer share | peer p99 ÷ ideal FIFO | peer cost per turn (ms) | overlaps (ours / peer) |',
      '|---|---|---|---|---|---|---|---|---|---|---|',
      ...PARAMS.processes.map((processes, p) => {
        const f = (library: LibraryId, figure: string) => hotKeyFigure(library, r, p, figure);
        const limit = f(LIMIT, 'throughput');
        return (
          `| ${processes} | ${fmt(limit, 0)} | ${fmt(f(OURS, 'throughput'), 0)} | ${fmt(f(OURS, 'throughput') / limit, 3)} | ${fmt(f(OURS, 'p99OfIdeal'), 2)} | ` +
          `${fmt(cost(OURS, r, p), 2)} | ${fmt(f(HOT_KEY_PEER, 'throughput'), 0)} | ${fmt(f(HOT_KEY_PEER, 'throughput') / limit, 3)} | ` +
          `${fmt(f(HOT_KEY_PEER, 'p99OfIdeal'), 2)} | ${fmt(cost(HOT_KEY_PEER, r, p), 2)} | ${f(OURS, 'overlaps') + f(OURS, 'lostUpdates')} / ${f(HOT_KEY_PEER, 'overlaps') + f(HOT_KEY_PEER, 'lostUpdates')} |`
        );
      }),
      '',
      ...image(CHART_NAMES.hotKey(rtt)),
    );
  }
  // How a turn's cost grows with the round trip, at each number of processes: a line over the round-trip times.
  const fits = PARAMS.processes.flatMap((processes, p) =>
    [OURS, HOT_KEY_PEER].map((library) => {
      const rtts = PARAMS.rtts.filter((_, r) => Number.isFinite(cost(library, r, p)));
      if (rtts.length < 2) return '';
      const fit = linearFit(rtts, rtts.map((rtt) => cost(library, PARAMS.rtts.indexOf(rtt), p)));
      const slope = `${fit.slope < 0 ? '−' : '+'} ${fmt(Math.abs(fit.slope), 2)}`;
      return `- ${processes} process${processes > 1 ? 'es' : ''}, ${name(library)}: cost per turn ≈ ${fmt(fit.intercept, 2)} ms ${slope} × round trip (r² ${fmt(fit.r2, 2)})`;
    }),
  ).filter(Boolean);
  if (fits.length) lines.push('Cost per turn against the round trip (a line over the round-trip times; the slope counts the round trips a hand-over waits for):', '', ...fits, '');
  lines.push(...image(CHART_NAMES.hotKeyCost), ...turnModel());
  return lines;
}

/**
 * Our turn taken apart (the model scenario 3a's note uses): a turn is a hold and the gap to the
 * next, and a gap either stays in the process or goes to another. The parts' sum is checked
 * against the measured turn, and the turn to another process is fitted against the round trip:
 * its slope counts the round trips it waits for (2 by design: the release reaching the masters
 * and their message coming back, then the waiter's confirmation), its intercept is this machine's part.
 */
function turnModel(): string[] {
  const rows: string[] = [];
  for (const [p, processes] of PARAMS.processes.entries()) {
    for (const [r, rtt] of PARAMS.rtts.entries()) {
      const f = (library: LibraryId, figure: string) => hotKeyFigure(library, r, p, figure);
      const turn = 1000 / f(OURS, 'throughput');
      if (!Number.isFinite(turn)) continue;
      const share = f(OURS, 'crossShare');
      const parts = turnFromParts((key) => f(OURS, key));
      rows.push(
        `| ${processes} | ${rtt} | ${fmt(turn, 2)} | ${fmt(parts, 2)} | ${fmt(f(OURS, 'meanHold'), 2)} | ${fmt(f(LIMIT, 'meanHold'), 2)} | ` +
          `${fmt(share, 2)} | ${fmt(f(OURS, 'handoverSame'), 2)} | ${fmt(f(OURS, 'handoverCross'), 2)} |`,
      );
    }
  }
  if (!rows.length) return [];
  const crossFits = PARAMS.processes.flatMap((processes, p) => {
    const rtts = PARAMS.rtts.filter((_, r) => Number.isFinite(hotKeyFigure(OURS, r, p, 'handoverCross')));
    if (rtts.length < 2) return [];
    const fit = linearFit(rtts, rtts.map((rtt) => hotKeyFigure(OURS, PARAMS.rtts.indexOf(rtt), p, 'handoverCross')));
    return [`- ${processes} processes: a turn to another process ≈ ${fmt(fit.intercept, 2)} ms + ${fmt(fit.slope, 2)} × round trip (r² ${fmt(fit.r2, 2)})`];
  });
  return [
    '',
    `**Our turn taken apart.** A turn of the lock is a hold and the gap to the next; a gap stays in the process (a hand-over ` +
      'without the masters, or the release and round that end a batch) or goes to another process (a release, the masters\' ' +
      'grant and its message, the waiter\'s confirmation). "Parts" = hold + (1 − share to another process) × gap in the process ' +
      '+ share × gap to another process: it must come out at the measured turn (1000 ÷ holds/s; the two differ by the time ' +
      'before the first hold and after the last).',
    '',
    '| processes | round trip (ms) | turn measured (ms) | parts (ms) | hold (ms) | the limit\'s hold (ms) | turns to another process | gap in the process (ms) | gap to another process (ms) |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
    ...(crossFits.length
      ? ['The turn to another process against the round trip: the slope counts the round trips it waits for (2 by design), the intercept is this machine\'s part.', '', ...crossFits, '']
      : []),
  ];
}
