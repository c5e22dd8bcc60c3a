import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { RedisFleet } from '../test/support/redis-fleet.js';
import { connectMasters, disconnectAll } from '../test/support/masters.js';
import type { LibraryId } from './adapters/index.js';
import { fmt, TELEMETRY_MARKERS, withSection } from './report.js';
import { latency } from './scenarios/latency.js';
import type { Figures, Scenario } from './scenarios/scenario.js';
import { throughput } from './scenarios/throughput.js';
import type { PairsJob, PairsResult, Way } from './telemetry-pairs.js';
import { describeMachine, engineSource } from './support/machine.js';
import { FLEET_SETTLE_MS, measureInChild, runInChild } from './support/measure.js';
import { median } from './support/stats.js';

/**
 * `npm run bench:telemetry [-- --reps N] [-- --smoke]`: what OpenTelemetry costs the engine, in
 * scenarios 1 and 2, two ways per repetition on one fleet of 5 masters:
 * - paired (bench/telemetry-pairs.ts): one process with the SDK installed, engines without
 *   telemetry, with `RedlockTelemetry()`, with a span for every acquire, and with the SDK floor,
 *   taking turns in short blocks, so the machine's ups and downs fall on all of them, each turn
 *   set against telemetry off's turn of its block: the cost of our telemetry;
 * - apart: the scenarios as the main benchmark runs them, a fresh process each, without the SDK
 *   and with the SDK and `RedlockTelemetry()`: what an app pays for both, noise included.
 * Writes its section of bench/RESULTS.md (between the telemetry markers, which the full
 * benchmark keeps).
 */
const { values: args } = parseArgs({
  options: { smoke: { type: 'boolean', default: false }, reps: { type: 'string' }, out: { type: 'string' } },
});
const mode = args.smoke ? 'smoke' : 'full';
const reps = Number(args.reps ?? (args.smoke ? 1 : 4));
const RESULTS = fileURLToPath(new URL('./RESULTS.md', import.meta.url));
const out = args.out ?? (args.smoke ? join(tmpdir(), 'nestjs-redlock-bench-telemetry.md') : RESULTS);
const PAIRS = fileURLToPath(new URL('./telemetry-pairs.ts', import.meta.url));
const PAIRS_PARAMS: Record<typeof mode, Omit<PairsJob, 'urls'>> = {
  full: { blocks: 12, cycles: 500, warmup: 3_000, blockMs: 1_000, callers: 200, ttlMs: 10_000 },
  smoke: { blocks: 2, cycles: 50, warmup: 50, blockMs: 200, callers: 20, ttlMs: 10_000 },
};
const APART: readonly LibraryId[] = ['nestjs-redlock', 'nestjs-redlock+otel'];
const SCENARIOS: readonly Scenario[] = [latency, throughput];

interface Figure {
  readonly label: string;
  readonly better: 'lower' | 'higher';
  readonly digits: number;
  /** From one paired run, per way: over the whole run, and per turn (in block order). */
  readonly paired: (result: PairsResult[Way]) => number;
  readonly turns: (result: PairsResult[Way]) => readonly number[];
  /** From one run apart: the scenario and its figure (CPU time is measured paired only). */
  readonly apart?: readonly [Scenario, string];
}
const FIGURES: readonly Figure[] = [
  { label: '1 one caller: acquire+release p50 (ms)', better: 'lower', digits: 3, paired: (r) => r.cycleP50, turns: (r) => r.cycleP50Turns, apart: [latency, 'cycleP50'] },
  { label: '1 one caller: acquire p50 (ms)', better: 'lower', digits: 3, paired: (r) => r.acquireP50, turns: (r) => r.acquireP50Turns, apart: [latency, 'acquireP50'] },
  { label: '2 200 callers: cycles/s, auto-pipelining', better: 'higher', digits: 0, paired: (r) => median(r.pipelined), turns: (r) => r.pipelined, apart: [throughput, 'pipelined'] },
  { label: '2 200 callers: cycles/s, plain clients', better: 'higher', digits: 0, paired: (r) => median(r.plain), turns: (r) => r.plain, apart: [throughput, 'plain'] },
  { label: '1 one caller: CPU per cycle (µs)', better: 'lower', digits: 1, paired: (r) => r.singleCpuUs, turns: (r) => r.singleCpuTurns },
  { label: '2 200 callers: CPU per cycle (µs), auto-pipelining', better: 'lower', digits: 1, paired: (r) => r.pipelinedCpuUs, turns: (r) => r.pipelinedCpuTurns },
  { label: '2 200 callers: CPU per cycle (µs), plain clients', better: 'lower', digits: 1, paired: (r) => r.plainCpuUs, turns: (r) => r.plainCpuTurns },
];

const started = Date.now();
const loadAtStart = loadavg()[0]!;
const engine = engineSource();
const paired: PairsResult[] = [];
/** apart[scenario][library]: one Figures per repetition. */
const apart = new Map<string, Map<LibraryId, Figures[]>>();
const failures: string[] = [];
const fleet = await RedisFleet.start(5);
try {
  const urls = fleet.urls();
  await sleep(FLEET_SETTLE_MS);
  const admin = await connectMasters(urls);
  const attempt = async (label: string, run: () => Promise<void>) => {
    try {
      await run();
    } catch (error) {
      failures.push(`${label}: ${(error as Error).message}`);
      console.error(`${label}: FAILED ${(error as Error).message}`);
    }
    await Promise.all(admin.map((client) => client.flushall()));
  };
  for (let rep = 0; rep < reps; rep++) {
    await attempt(`[rep ${rep + 1}/${reps}] paired`, async () => {
      const result = await runInChild<PairsResult>(PAIRS, { ...PAIRS_PARAMS[mode], urls });
      paired.push(result);
      console.log(`[rep ${rep + 1}/${reps}] paired: ${JSON.stringify(result)}`);
    });
    // The order rotates, so that drift of the machine over the run falls on both alike.
    for (const library of rep % 2 === 0 ? APART : [...APART].reverse()) {
      for (const scenario of SCENARIOS) {
        const label = `[rep ${rep + 1}/${reps}] ${scenario.id} / ${library}`;
        await attempt(label, async () => {
          const figures = await measureInChild({ scenario: scenario.id, library, urls, params: scenario.params[mode] });
          const byLibrary = apart.get(scenario.id) ?? new Map<LibraryId, Figures[]>();
          apart.set(scenario.id, byLibrary);
          byLibrary.set(library, [...(byLibrary.get(library) ?? []), figures]);
          console.log(`${label}: ${JSON.stringify(figures)}`);
        });
      }
    }
  }
  disconnectAll(admin);
} finally {
  await fleet.stopAll();
}

const section = render();
const previous = existsSync(out) ? readFileSync(out, 'utf8') : '';
writeFileSync(out, withSection(previous, section, TELEMETRY_MARKERS));
console.log(`\n${section}\n\nwrote ${out}`);

/** How much slower (times) or fewer (rates) `value` is than `base`. */
function cost(figure: Figure, base: number, value: number): number {
  return figure.better === 'lower' ? value / base - 1 : 1 - value / base;
}

function render(): string {
  const machine = describeMachine();
  const pairedRows = FIGURES.map((figure) => {
    const of = (way: Way) => paired.map((result) => figure.paired(result[way]));
    // Paired: each turn against telemetry off's turn of the same block; the median over every
    // turn of every repetition, and each repetition's median in brackets.
    const costs = (way: Way) =>
      paired.map((result) => {
        const off = figure.turns(result.off);
        return figure.turns(result[way]).map((value, i) => cost(figure, off[i]!, value));
      });
    const cell = (way: Way) => {
      const byRep = costs(way);
      return `${pct(median(byRep.flat()))} (${byRep.map((turns) => pct(median(turns))).join(', ')})`;
    };
    const cells = [
      fmt(median(of('off')), figure.digits),
      fmt(median(of('telemetry')), figure.digits),
      fmt(median(of('spans')), figure.digits),
      fmt(median(of('floor')), figure.digits),
      cell('telemetry'),
      cell('spans'),
      cell('floor'),
    ];
    return `| ${figure.label} | ${cells.join(' | ')} |`;
  });
  const apartRows = FIGURES.flatMap((figure) => {
    if (!figure.apart) return [];
    const [scenario, key] = figure.apart;
    const of = (library: LibraryId) => (apart.get(scenario.id)?.get(library) ?? []).map((figures) => figures[key] ?? Number.NaN);
    const [bare, ours] = [of('nestjs-redlock'), of('nestjs-redlock+otel')];
    const every = bare.map((value, i) => `${fmt(value, figure.digits)} / ${fmt(ours[i] ?? Number.NaN, figure.digits)}`).join(', ');
    return `| ${figure.label} | ${fmt(median(bare), figure.digits)} | ${fmt(median(ours), figure.digits)} | ${pct(cost(figure, median(bare), median(ours)))} | ${every} |`;
  });
  const p = PAIRS_PARAMS[mode];
  const sum = (way: Way) => paired.reduce((total, result) => total + result[way].errors, 0);
  const hooks = (way: Way) => fmt(median(paired.map((result) => result[way].hooksCpuUs)), 2);
  const at = new Date().toISOString().slice(0, 16).replace('T', ' ');
  const end = engineSource();
  return [
    TELEMETRY_MARKERS[0],
    '## Telemetry overhead: OpenTelemetry installed and recording',
    '',
    `Written by \`npm run bench:telemetry\` (bench/telemetry.ts) on ${at} UTC: ${mode} run, ${reps} repetition(s), ` +
      `${((Date.now() - started) / 60_000).toFixed(1)} min, on 5 local masters. ` +
      (end.digest === engine.digest ? `${engine.label}.` : `lib/ changed during the run: ${engine.label} at the start, ${end.label} at the end.`),
    '',
    `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, ${machine.os}, Node ${machine.node}, ` +
      `redis-server ${machine.redis}; load average (1 min) ${loadAtStart.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after.`,
    '',
    'The SDK (bench/support/otel-sdk.ts): global MeterProvider with a reader collecting every second, every span sampled into a ' +
      'BatchSpanProcessor, the AsyncLocalStorage context manager in use; its exporters drop what they receive (encoding and ' +
      'sending are the SDK\'s cost, whoever records). `RedlockTelemetry()` records every metric; by default it starts an acquire ' +
      'span only under an active span, and these scenarios have none, so the third column gives every acquire a span ' +
      '(`requireParentSpan: false`), as locks taken inside traced requests get. "SDK floor" is not our telemetry but the ' +
      'least any reporting of these metrics through the SDK costs: per cycle the two histogram records (the acquire\'s ' +
      'duration with its outcome attribute, the lock\'s held time without attributes) of the durations the engine passes ' +
      'to its hooks, through one observer shared by every call, nothing else.',
    '',
    `**Paired**, the cost of the telemetry itself: in each repetition one process with the SDK installed runs four engines ` +
      `in turns of ${p.cycles} cycles (scenario 1, after ${p.warmup} warm-up cycles each) and of ${p.blockMs / 1000} s ` +
      `(scenario 2, ${p.callers} callers), in ${p.blocks} blocks of one turn per engine. The order within a block follows ` +
      'the rows of a Williams square (each engine goes first once in four blocks and follows each other engine once). Each ' +
      'turn ends by flushing its spans and collecting its garbage, within its CPU time: no engine pays for what another ' +
      'left behind. Cost: each turn against telemetry off\'s turn of the same block (slower or more CPU for times, fewer ' +
      `for rates; negative is better); the median over all ${p.blocks * Math.max(1, paired.length)} turns, and each repetition's median in brackets. ` +
      'CPU per cycle is this process\'s CPU time (every thread, GC included) in the turn and its settling, less a settling ' +
      'right after a settling (the cost of marking the live heap, the same for every engine), divided by the cycles it ran: ' +
      'other processes on the machine disturb it far less than they disturb wall time.',
    '',
    '| figure | telemetry off | `RedlockTelemetry()` | a span per acquire | SDK floor | cost of `RedlockTelemetry()` | cost with a span per acquire | cost of the SDK floor |',
    '|---|---|---|---|---|---|---|---|',
    ...pairedRows,
    '',
    `The hooks alone (bench/telemetry-pairs.ts, same process and SDK, no Redis): what the engine calls for one ` +
      `uncontended acquire and release costs ${hooks('telemetry')} µs of CPU with \`RedlockTelemetry()\`, ` +
      `${hooks('spans')} µs with a span per acquire (medians over the repetitions), against ` +
      `${fmt(median(paired.map((r) => r.off.pipelinedCpuUs)), 1)} µs per cycle of scenario 2 with telemetry off ` +
      `(${pct(median(paired.map((r) => r.telemetry.hooksCpuUs)) / median(paired.map((r) => r.off.pipelinedCpuUs)))} and ` +
      `${pct(median(paired.map((r) => r.spans.hooksCpuUs)) / median(paired.map((r) => r.off.pipelinedCpuUs)))} of it).`,
    '',
    `Failed acquires during the scenario 2 turns (every master missed the node timeout on a starved machine), over all ` +
      `repetitions: telemetry off ${sum('off')}, \`RedlockTelemetry()\` ${sum('telemetry')}, a span per acquire ${sum('spans')}.`,
    '',
    '**Apart**, SDK and telemetry together against neither: scenarios 1 and 2 exactly as in the main benchmark, a fresh ' +
      'process each, without the SDK and with it and `RedlockTelemetry()`, in alternating order. On a shared machine ' +
      'these move with its load from one process to the next; the paired figures are the ones to read for our cost.',
    '',
    '| figure | no SDK | SDK + `RedlockTelemetry()` | cost (medians) | every repetition (no SDK / SDK + telemetry) |',
    '|---|---|---|---|---|',
    ...apartRows,
    ...(failures.length ? ['', 'Failed runs:', ...failures.map((failure) => `- ${failure}`)] : []),
    TELEMETRY_MARKERS[1],
  ].join('\n');
}

function pct(share: number): string {
  return Number.isFinite(share) ? `${share >= 0 ? '+' : '−'}${Math.abs(share * 100).toFixed(1)}%` : '–';
}
