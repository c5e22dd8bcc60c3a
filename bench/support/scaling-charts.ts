import type { LineChart, LinePoint } from './charts.js';

/**
 * The charts of bench/scaling.ts's sweeps, built from plain curves so that the run (from its
 * repetitions in memory) and bench/charts.ts (from the tables of RESULTS.md) draw the same ones.
 */
export interface Curve {
  /** The library's display name, or the reference's ("the limit …"). */
  name: string;
  ours?: boolean;
  /** Drawn dashed and grey: not a library (the limit). */
  reference?: boolean;
  points: { x: number; y: number; min?: number; max?: number; panel?: string }[];
}

/** Where the figures come from, for every subtitle: "npm run bench:scaling, 2026-11-25 13:15 UTC, full run, median of 2 repetitions". */
export interface ScalingSource {
  when: string;
  mode: string;
  reps: number;
}

function from(source: ScalingSource): string {
  const spread = source.reps > 1 ? `median of ${source.reps} repetitions` : '1 repetition';
  return `npm run bench:scaling, ${source.when} UTC, ${source.mode} run, ${spread}`;
}

function chart(name: string, title: string, subtitle: string[], x: string, y: string, curves: readonly Curve[], extra: Partial<LineChart> = {}): LineChart {
  const points: LinePoint[] = curves.flatMap((curve) =>
    curve.points.filter((point) => Number.isFinite(point.y)).map((point) => ({ series: curve.name, ...point })),
  );
  const ours = curves.find((curve) => curve.ours)?.name;
  return {
    kind: 'line',
    name,
    title,
    subtitle,
    x,
    y,
    points,
    references: curves.filter((curve) => curve.reference).map((curve) => curve.name),
    ...(ours ? { ours } : {}),
    ...extra,
  };
}

/** The charts' file names (without .svg), for the run's and bench/charts.ts's image links. */
export const CHART_NAMES = {
  masters: (rtt: number) => `scaling-masters-rtt-${rtt}ms`,
  latencyRtt: 'scaling-masters-by-rtt',
  hotKey: (rtt: number) => `scaling-hot-key-rtt-${rtt}ms`,
  hotKeyCost: 'scaling-hot-key-cost-by-rtt',
} as const;

/** Cycle p50 against the number of masters at one round trip, one line per library. */
export function mastersChart(rtt: number, source: ScalingSource, curves: readonly Curve[]): LineChart {
  return chart(
    CHART_NAMES.masters(rtt),
    `Acquire + release against the number of masters, round trip ${rtt} ms`,
    [`One caller, a new key per cycle (scenario 1); cycle p50 in ms, lower is better`, from(source)],
    'masters',
    'acquire + release p50 (ms)',
    curves,
  );
}

/** Cycle p50 against the round trip, one panel per number of masters, one line per library. */
export function latencyRttChart(source: ScalingSource, curves: readonly Curve[]): LineChart {
  return chart(
    CHART_NAMES.latencyRtt,
    'Acquire + release against the round-trip time',
    ['One caller, a new key per cycle (scenario 1); cycle p50 in ms (log scale), lower is better; one panel per number of masters', from(source)],
    'round trip (ms)',
    'acquire + release p50 (ms)',
    curves,
    { logY: true, panels: 'masters' },
  );
}

/** Hot key holds/s against the number of processes at one round trip: ours, the peer and the limit. */
export function hotKeyChart(rtt: number, source: ScalingSource, curves: readonly Curve[]): LineChart {
  return chart(
    CHART_NAMES.hotKey(rtt),
    `Hot key (scenario 3a's workload) against the number of processes, round trip ${rtt} ms`,
    ['5 workers a process on one key, 5 masters; holds/s, higher is better; dashed: the limit (a perfect in-process mutex)', from(source)],
    'processes',
    'holds/s',
    curves,
  );
}

/** Hot key cost per turn against the round trip, one panel per number of processes. */
export function hotKeyCostChart(source: ScalingSource, curves: readonly Curve[]): LineChart {
  const positive = curves.every((curve) => curve.points.every((point) => !Number.isFinite(point.y) || point.y > 0));
  return chart(
    CHART_NAMES.hotKeyCost,
    'Hot key: what a hand-over costs per turn against the round-trip time',
    [`Cost per turn = 1 ÷ holds/s − 1 ÷ the limit's, in ms${positive ? ' (log scale)' : ''}, lower is better; one panel per number of processes`, from(source)],
    'round trip (ms)',
    'cost per turn (ms)',
    curves,
    { logY: positive, panels: 'processes' },
  );
}

/** The panel of a number of masters, or of processes (the same words from the run and from RESULTS.md). */
export const mastersPanel = (masters: number): string => `${masters} master${masters > 1 ? 's' : ''}`;
export const processesPanel = (processes: number): string => `${processes} process${processes > 1 ? 'es' : ''}`;
/** The hot key's reference line. */
export const LIMIT_CURVE = 'the limit (perfect in-process mutex)';

/** The range over the repetitions, when there were several. */
export function spread(values: readonly number[]): { min?: number; max?: number } {
  const finite = values.filter(Number.isFinite);
  return finite.length > 1 ? { min: Math.min(...finite), max: Math.max(...finite) } : {};
}
