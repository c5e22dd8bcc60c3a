import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

/**
 * The benchmark's figures as SVG charts: Vega-Lite specs compiled to Vega and rendered by vega's
 * own SVG renderer in Node (`View#toSVG()`: no browser, no canvas; text widths are estimated from
 * the font size, so labels are laid out a little loosely). The runs that write Markdown describe
 * their charts as {@link BarChart} or {@link LineChart}, write them with {@link writeCharts} and
 * link them with {@link imageLink}, next to the table each pictures.
 */

/** One bar: a library's headline figure, with the range over the repetitions when there were several. */
export interface Bar {
  library: string;
  value: number;
  min?: number;
  max?: number;
  /** The value as the table shows it, with its unit. */
  label: string;
  ours?: boolean;
}

export interface BarChart {
  kind: 'bar';
  /** File name in the charts folder, without .svg. */
  name: string;
  title: string;
  subtitle: string[];
  /** The axis title: the figure and its unit. */
  axis: string;
  bars: Bar[];
  /** A reference line across the bars, such as the limit (a perfect in-process mutex). */
  reference?: { value: number; label: string };
}

export interface LinePoint {
  series: string;
  x: number;
  y: number;
  min?: number;
  max?: number;
  /** Small multiples: the panel this point belongs to. */
  panel?: string;
}

export interface LineChart {
  kind: 'line';
  name: string;
  title: string;
  subtitle: string[];
  x: string;
  y: string;
  points: LinePoint[];
  /** Series drawn dashed and grey: references such as the limit, not libraries. */
  references?: string[];
  /** Series drawn first and in red: ours. */
  ours?: string;
  logY?: boolean;
  /** Title of the panels' header when the points have panels. */
  panels?: string;
}

export type Chart = BarChart | LineChart;

const OURS_COLOR = '#d62728';
const PEER_COLOR = '#4c78a8';
const REFERENCE_COLOR = '#555555';
/** For the peers' lines (ours is red, references grey). */
const PALETTE = ['#4c78a8', '#f58518', '#54a24b', '#b279a2', '#9d755d', '#72b7b2', '#eeca3b'];

const CONFIG = {
  font: 'Helvetica, Arial, sans-serif',
  background: 'white',
  title: { anchor: 'start', fontSize: 14, subtitleFontSize: 11, subtitleColor: '#444', offset: 10 },
  axis: { labelFontSize: 11, titleFontSize: 11, titleFontWeight: 'normal' },
  legend: { labelFontSize: 11, titleFontSize: 11, labelLimit: 320 },
  header: { labelFontSize: 11, titleFontSize: 11, titleFontWeight: 'normal' },
} as const;

export function specOf(chart: Chart): TopLevelSpec {
  return chart.kind === 'bar' ? barSpec(chart) : lineSpec(chart);
}

function barSpec(chart: BarChart): TopLevelSpec {
  const values = chart.bars.map((bar) => ({
    ...bar,
    ours: Boolean(bar.ours),
    // The label sits right of the bar and of its whisker.
    labelAt: Math.max(bar.value, bar.max ?? bar.value),
  }));
  const y = { field: 'library', type: 'nominal', sort: null, title: null, axis: { labelLimit: 400 } } as const;
  const longest = Math.max(...values.map((bar) => bar.labelAt), chart.reference?.value ?? 0);
  const x = {
    type: 'quantitative',
    title: chart.axis,
    scale: { domain: [0, longest * 1.22], nice: false },
    axis: { tickCount: 6, labelOverlap: true, labelFlush: true },
  } as const;
  const layers: any[] = [
    {
      mark: { type: 'bar', height: { band: 0.7 } },
      encoding: {
        y,
        x: { ...x, field: 'value' },
        color: { condition: { test: 'datum.ours', value: OURS_COLOR }, value: PEER_COLOR },
      },
    },
    {
      transform: [{ filter: 'isValid(datum.min) && isValid(datum.max)' }],
      mark: { type: 'errorbar', ticks: true, color: '#222' },
      encoding: { y, x: { ...x, field: 'min' }, x2: { field: 'max' } },
    },
    {
      mark: { type: 'text', align: 'left', baseline: 'middle', dx: 4, fontSize: 11 },
      encoding: { y, x: { ...x, field: 'labelAt' }, text: { field: 'label' } },
    },
  ];
  if (chart.reference) {
    const reference = { data: { values: [chart.reference] } };
    layers.push(
      { ...reference, mark: { type: 'rule', color: REFERENCE_COLOR, strokeDash: [5, 3], strokeWidth: 1.5 }, encoding: { x: { ...x, field: 'value' } } },
      {
        ...reference,
        mark: { type: 'text', align: 'right', baseline: 'top', dx: -4, y: 0, dy: -14, fontSize: 10, color: REFERENCE_COLOR },
        encoding: { x: { ...x, field: 'value' }, text: { field: 'label' } },
      },
    );
  }
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: chart.title, subtitle: chart.subtitle },
    width: 460,
    height: { step: 28 },
    data: { values },
    layer: layers,
    config: CONFIG,
  } as TopLevelSpec;
}

function lineSpec(chart: LineChart): TopLevelSpec {
  const series = [...new Set(chart.points.map((point) => point.series))];
  const references = new Set(chart.references ?? []);
  const ordered = [...series.filter((s) => s === chart.ours), ...series.filter((s) => s !== chart.ours && !references.has(s)), ...series.filter((s) => references.has(s))];
  let peer = 0;
  const colors = ordered.map((s) => (s === chart.ours ? OURS_COLOR : references.has(s) ? REFERENCE_COLOR : PALETTE[peer++ % PALETTE.length]!));
  const xs = [...new Set(chart.points.map((point) => point.x))].sort((a, b) => a - b);
  const values = chart.points.map((point) => ({ ...point, kind: references.has(point.series) ? 'reference' : 'measured' }));
  const color = {
    field: 'series',
    type: 'nominal',
    title: null,
    scale: { domain: ordered, range: colors },
    legend: { orient: 'bottom', direction: 'vertical', columns: ordered.length > 3 ? 2 : 1 },
  } as const;
  const x = {
    field: 'x',
    type: 'quantitative',
    title: chart.x,
    scale: { domain: [xs[0] ?? 0, xs.at(-1) ?? 1], nice: false },
    axis: { values: xs, grid: false, format: '~g' },
  } as const;
  const y = { type: 'quantitative', title: chart.y, scale: chart.logY ? { type: 'log' } : { zero: true } } as const;
  const line = {
    mark: { type: 'line', point: { size: 40 }, strokeWidth: 2 },
    encoding: {
      x,
      y: { ...y, field: 'y' },
      color,
      strokeDash: { field: 'kind', type: 'nominal', scale: { domain: ['measured', 'reference'], range: [[1, 0], [5, 3]] }, legend: null },
    },
  };
  const layer: any[] = [
    line,
    // Ours once more on top, where a peer's line runs over it.
    ...(chart.ours ? [{ ...line, transform: [{ filter: { field: 'series', equal: chart.ours } }] }] : []),
    {
      transform: [{ filter: 'isValid(datum.min) && isValid(datum.max)' }],
      mark: { type: 'errorbar', ticks: { size: 6 } },
      encoding: { x, y: { ...y, field: 'min' }, y2: { field: 'max' }, color },
    },
  ];
  const title = { text: chart.title, subtitle: chart.subtitle };
  const panels = [...new Set(chart.points.map((point) => point.panel).filter((panel) => panel !== undefined))];
  if (panels.length) {
    return {
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title,
      data: { values },
      facet: { column: { field: 'panel', type: 'nominal', sort: panels, title: chart.panels ?? null } },
      spec: { width: 150, height: 200, layer },
      resolve: { scale: { y: 'shared' } },
      config: CONFIG,
    } as TopLevelSpec;
  }
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    width: 460,
    height: 260,
    data: { values },
    layer,
    config: CONFIG,
  } as TopLevelSpec;
}

/**
 * Without a canvas vega estimates every text as 0.8 em a character, twice the width of most
 * sans-serif text: the SVG came out with wide empty margins and legends cut short. This is the
 * hook vega leaves for that (`textMetrics.width`, as vl-convert sets it): a per-character
 * estimate of Helvetica/Arial's widths, close enough for layout (the viewer's font draws the text).
 */
function sansSerifWidth(item: { fontSize?: number; fontWeight?: string | number; limit?: number }, text: unknown): number {
  const size = item.fontSize != null ? Number(item.fontSize) || 0 : 11;
  const line = text == null ? '' : String(text).trim();
  let em = 0;
  for (const ch of line) {
    em += /[ijl.,:;'!|]/.test(ch) ? 0.25 : /[ frt()[\]/-]/.test(ch) ? 0.34 : /[mwMW%@]/.test(ch) ? 0.86 : /[A-Z]/.test(ch) ? 0.68 : 0.56;
  }
  const bold = item.fontWeight === 'bold' || Number(item.fontWeight) >= 600;
  // 10% to spare: DejaVu Sans, where Helvetica and Arial are missing, runs wider.
  return em * size * (bold ? 1.18 : 1) * 1.1;
}

const { textMetrics } = vega as unknown as { textMetrics: { width: (item: object, text: unknown) => number } };

/** The chart as an SVG document, rendered headless by vega's SVG renderer. */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  textMetrics.width = sansSerifWidth;
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/**
 * Where a report's charts go: bench/charts/ beside bench/RESULTS.md for the official runs, else a
 * folder named after the report beside it (a smoke run never touches bench/charts).
 */
export function chartsDirFor(reportPath: string, official: boolean): string {
  return official ? join(dirname(reportPath), 'charts') : join(dirname(reportPath), `${basename(reportPath, '.md')}.charts`);
}

/** Renders and writes every chart as `<dir>/<name>.svg`; returns the files written. */
export async function writeCharts(dir: string, charts: readonly Chart[]): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const files: string[] = [];
  for (const chart of charts) {
    const file = join(dir, `${chart.name}.svg`);
    writeFileSync(file, `${await renderSvg(specOf(chart))}\n`);
    files.push(file);
  }
  return files;
}

/** The Markdown image of a chart, its path relative to the report that shows it. */
export function imageLink(chart: Pick<Chart, 'name' | 'title'>, dir: string, reportPath: string): string {
  const path = relative(dirname(reportPath), join(dir, `${chart.name}.svg`)).split('\\').join('/');
  return `![${chart.title.replace(/[[\]]/g, '')}](${path})`;
}

/** Matches a line that is one of our chart images (any folder, .svg), to refresh them. */
export const IMAGE_LINE = /^!\[[^\]]*\]\([^)]*\.svg\)$/;

/**
 * The headline figure of each scenario's bar chart: the table column (its label, as in
 * RESULTS.md) and the figure's key. Scenario 3 counts holds over its window: shown per second.
 */
export const SCENARIO_HEADLINES: Record<string, { key: string; label: string; axis: string; unit: string; digits: number; better: 'lower' | 'higher'; perWindow?: boolean }> = {
  latency: { key: 'cycleP50', label: 'cycle p50 (ms)', axis: 'acquire + release p50 (ms)', unit: 'ms', digits: 3, better: 'lower' },
  throughput: { key: 'pipelined', label: 'cycles/s, auto-pipelining', axis: 'acquire + release cycles/s, auto-pipelining', unit: '/s', digits: 0, better: 'higher' },
  'hot-key': { key: 'cycles', label: 'holds', axis: 'holds/s (holds in the window ÷ its length)', unit: '/s', digits: 0, better: 'higher', perWindow: true },
  'hot-key-store': { key: 'throughput', label: 'holds/s', axis: 'holds/s', unit: '/s', digits: 0, better: 'higher' },
  'hot-semaphore': { key: 'throughput', label: 'holds/s', axis: 'holds/s', unit: '/s', digits: 0, better: 'higher' },
  'rw-read-heavy': { key: 'throughput', label: 'holds/s', axis: 'holds/s', unit: '/s', digits: 0, better: 'higher' },
  'rw-write-heavy': { key: 'throughput', label: 'holds/s', axis: 'holds/s', unit: '/s', digits: 0, better: 'higher' },
};

/** The name of a scenario's chart file. */
export function scenarioChartName(scenarioId: string): string {
  return `scenario-${scenarioId}`;
}

/** "1,234/s" or "0.488 ms": a headline figure as its chart label shows it. */
export function headlineLabel(value: number, headline: { unit: string; digits: number }): string {
  const text = value.toLocaleString('en', { minimumFractionDigits: headline.digits, maximumFractionDigits: headline.digits });
  return headline.unit === 'ms' ? `${text} ms` : `${text}${headline.unit}`;
}

/**
 * The bar chart of one scenario's headline figure per library; the limit (when among the rows) as
 * a reference line. `rows` hold each library's median and every repetition's value.
 */
export function scenarioBarChart(input: {
  scenarioId: string;
  /** The section title, e.g. "3a. Hot key with store round trips …". */
  sectionTitle: string;
  /** "npm run bench, 2026-11-26 02:12 UTC, full run". */
  source: string;
  reps: number;
  rows: { library: string; ours: boolean; limit: boolean; median: number; values: number[] }[];
  /** Scenario 3: the window's length in seconds, to turn holds into holds/s. */
  windowS?: number;
}): BarChart | undefined {
  const headline = SCENARIO_HEADLINES[input.scenarioId];
  if (!headline) return undefined;
  const scale = headline.perWindow ? 1 / (input.windowS ?? Number.NaN) : 1;
  const bars: Bar[] = [];
  let reference: BarChart['reference'];
  for (const row of input.rows) {
    const value = row.median * scale;
    if (!Number.isFinite(value)) continue;
    if (row.limit) {
      reference = { value, label: `the limit (perfect in-process ${input.scenarioId === 'hot-semaphore' ? 'semaphore' : 'mutex'}): ${headlineLabel(value, headline)}` };
      continue;
    }
    const values = row.values.map((v) => v * scale).filter(Number.isFinite);
    bars.push({
      library: row.library,
      value,
      label: headlineLabel(value, headline),
      ours: row.ours,
      ...(values.length > 1 ? { min: Math.min(...values), max: Math.max(...values) } : {}),
    });
  }
  if (!bars.length) return undefined;
  const [number, ...rest] = input.sectionTitle.split(' ');
  const spread = input.reps > 1 ? `median of ${input.reps} repetitions, whiskers from the lowest to the highest` : `${input.reps} repetition`;
  return {
    kind: 'bar',
    name: scenarioChartName(input.scenarioId),
    title: `Scenario ${number!.replace(/\.$/, '')}: ${rest.join(' ')}`,
    subtitle: [`${headline.axis}, ${headline.better} is better${reference ? '; dashed: the limit, no Redis lock at all' : ''}`, `${input.source}; ${spread}`],
    axis: headline.axis,
    bars,
    ...(reference ? { reference } : {}),
  };
}
