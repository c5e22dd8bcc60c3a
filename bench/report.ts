import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createAdapter, LIBRARIES, LIMIT, OURS, type LibraryId } from './adapters/index.js';
import type { Scenario } from './scenarios/scenario.js';
import { type BarChart, scenarioBarChart, SCENARIO_HEADLINES } from './support/charts.js';
import { describeClientOptions } from './support/clients.js';
import { describeMachine, installedVersion, type EngineSource } from './support/machine.js';
import type { Results } from './support/results.js';
import { bestPeer, evaluateTargets, type TargetRow } from './targets.js';

const RESULTS = new URL('./RESULTS.md', import.meta.url);
const SUMMARY = new URL('../docs/benchmark.md', import.meta.url);
/** Hand-written diagnosis in RESULTS.md, kept when the benchmark rewrites the file. */
const NOTES = ['<!-- notes:start -->', '<!-- notes:end -->'] as const;
/** The telemetry overhead section (bench/telemetry.ts), also kept when the benchmark rewrites the file. */
export const TELEMETRY_MARKERS = ['<!-- telemetry:start -->', '<!-- telemetry:end -->'] as const;
/** The replicaAcks cost section (bench/replica-acks.ts), also kept when the benchmark rewrites the file. */
export const REPLICA_ACKS_MARKERS = ['<!-- replica-acks:start -->', '<!-- replica-acks:end -->'] as const;
/** Leadership takeover times (bench/leadership-takeover.ts), also kept when the benchmark rewrites the file. */
export const LEADERSHIP_MARKERS = ['<!-- leadership:start -->', '<!-- leadership:end -->'] as const;
/** The scaling curves (bench/scaling.ts), also kept when the benchmark rewrites the file. */
export const SCALING_MARKERS = ['<!-- scaling:start -->', '<!-- scaling:end -->'] as const;
/** Where docs/benchmark.md shows the summary table. */
const SUMMARY_TABLE = ['<!-- bench:start -->', '<!-- bench:end -->'] as const;

export interface ReportInput {
  results: Results;
  scenarios: readonly Scenario[];
  mode: 'full' | 'smoke';
  reps: number;
  minutes: number;
  /** 1-minute load average before and after: anything else running on the machine shows here. */
  load: [number, number];
  /** engineSource() at the start and the end of the run. */
  engine: [EngineSource, EngineSource];
  /** When the run ended, "2026-11-26 02:12" (UTC); default now. */
  when?: string;
  /** Per scenario id, the Markdown image of its chart, shown under its table. */
  images?: ReadonlyMap<string, string>;
  /** Where the report is written, when not bench/RESULTS.md: the kept sections' chart links then point back to bench/charts. */
  reportPath?: string;
}

export function renderReport({ results, scenarios, mode, reps, minutes, load, engine, when = utcMinute(), images, reportPath }: ReportInput): string {
  const machine = describeMachine();
  const adapters = LIBRARIES.map((id) => ({ id, adapter: createAdapter(id) }));
  const targets = evaluateTargets(results);
  return [
    '# Benchmark: nestjs-redlock and its peers',
    '',
    `Written by \`npm run bench\` (bench/run.ts) on ${when} UTC: ` +
      `${mode} run, ${reps} repetition(s), each figure the median of the repetitions; the run took ${minutes.toFixed(1)} min. ` +
      'All libraries ran against the same 5 local redis-server masters, started once for the run, ' +
      'in an order rotated each repetition; every measurement is a fresh Node process.',
    '',
    // Commits that touch only tests or docs leave the measured code as it was: compare the code.
    engine[0].digest === engine[1].digest
      ? `Engine measured: ${engine[1].label}.`
      : `**The engine changed during the run**: ${engine[0].label} at the start, ${engine[1].label} at the end; repetitions may mix versions.`,
    '',
    '## Summary',
    '',
    summaryTable(targets),
    '',
    '## Machine',
    '',
    '| CPU | cores | memory | OS | Node | redis-server | load avg (1 min) before / after |',
    '|---|---|---|---|---|---|---|',
    `| ${machine.cpu} | ${machine.cores} | ${machine.memoryGiB} GiB | ${machine.os} | ${machine.node} | ${machine.redis} | ${load.map((l) => l.toFixed(2)).join(' / ')} |`,
    '',
    '## Libraries and settings',
    '',
    `Every library gets its own ioredis ${installedVersion('ioredis')} clients, one per master, built alike: ` +
      `${describeClientOptions()}. Wait settings, each library's documented way to wait up to 30 s, ` +
      'its own retry pause and jitter left at their defaults:',
    '',
    '| library | version | settings |',
    '|---|---|---|',
    ...adapters.map(({ adapter }) => `| ${adapter.name} | ${installedVersion(adapter.packageName)} | ${adapter.settings} |`),
    '',
    ...scenarios.flatMap((scenario) => scenarioSection(results, scenario, mode, images?.get(scenario.id))),
    '## Targets',
    '',
    ...targets.map((t) => `- **${status(t.met)}** ${t.scenario}: ${t.figure} = ${fmt(t.ours, t.digits)}, target ${t.target}: ${t.margin}.`),
    '',
    ...previousTelemetry(),
    ...previousSection(REPLICA_ACKS_MARKERS),
    ...previousSection(LEADERSHIP_MARKERS),
    ...previousSection(SCALING_MARKERS).map((text) => relinked(text, reportPath)),
    '## Notes on the run',
    '',
    previousNotes(),
    '',
    ...(results.failures.length ? ['## Failed runs', '', ...results.failures.map((f) => `- ${f}`), ''] : []),
    '## Every repetition',
    '',
    ...scenarios.flatMap((scenario) => rawSection(results, scenario)),
  ].join('\n');
}

/** The summary table docs/benchmark.md shows, between its bench markers. */
export function updateSummaryTable(report: string): void {
  const readme = readFileSync(SUMMARY, 'utf8');
  const [start, end] = SUMMARY_TABLE;
  const from = readme.indexOf(start);
  const to = readme.indexOf(end);
  if (from < 0 || to < from) return;
  const table = /## Summary\n\n([\s\S]*?)\n\n## /.exec(report)?.[1] ?? '';
  writeFileSync(SUMMARY, `${readme.slice(0, from + start.length)}\n${table}\n${readme.slice(to)}`);
}

function summaryTable(rows: TargetRow[]): string {
  return [
    '| scenario | figure | nestjs-redlock | best peer | ratio | target | met |',
    '|---|---|---|---|---|---|---|',
    ...rows.map((r) => {
      const peer = r.bestPeer ? `${fmt(r.bestPeer.value, r.digits)} (${r.bestPeer.library})` : '–';
      return `| ${r.scenario} | ${r.figure} | ${fmt(r.ours, r.digits)} | ${peer} | ${fmt(r.ratio, 2)} | ${r.target} | ${status(r.met)} |`;
    }),
  ].join('\n');
}

/** "2026-11-26 02:12": now, to the minute, UTC. */
export function utcMinute(): string {
  return new Date().toISOString().slice(0, 16).replace('T', ' ');
}

/**
 * Each scenario's bar chart of its headline figure per library (bench/support/charts.ts), the
 * limit as a reference line, whiskers over the repetitions: [scenario id, chart].
 */
export function scenarioCharts(results: Results, scenarios: readonly Scenario[], mode: 'full' | 'smoke', reps: number, when: string): [string, BarChart][] {
  return scenarios.flatMap((scenario): [string, BarChart][] => {
    const headline = SCENARIO_HEADLINES[scenario.id];
    if (!headline) return [];
    const durationMs = (scenario.params[mode] as { durationMs?: number }).durationMs;
    const chart = scenarioBarChart({
      scenarioId: scenario.id,
      sectionTitle: scenario.title,
      source: `npm run bench, ${when} UTC, ${mode} run`,
      reps,
      rows: [...LIBRARIES, LIMIT]
        .filter((id) => results.repetitions(scenario.id, id) > 0)
        .map((id) => ({
          library: createAdapter(id).name,
          ours: id === OURS,
          limit: id === LIMIT,
          median: results.median(scenario.id, id, headline.key),
          values: results.values(scenario.id, id, headline.key),
        })),
      ...(durationMs ? { windowS: durationMs / 1000 } : {}),
    });
    return chart ? [[scenario.id, chart]] : [];
  });
}

function scenarioSection(results: Results, scenario: Scenario, mode: 'full' | 'smoke', image?: string): string[] {
  const libraries = [...LIBRARIES, LIMIT].filter((id) => results.repetitions(scenario.id, id) > 0);
  const limit = scenario.limitMetric && results.repetitions(scenario.id, LIMIT) > 0 ? scenario.limitMetric : undefined;
  const header = ['library', ...(limit ? ['share of the limit'] : []), ...scenario.metrics.map((metric) => metric.label)];
  const rows = libraries.map((library) => [
    name(library),
    ...(limit ? [fmt(results.median(scenario.id, library, limit) / results.median(scenario.id, LIMIT, limit), 3)] : []),
    ...scenario.metrics.map((metric) => {
      const value = results.median(scenario.id, library, metric.key);
      if (metric.informational || library === LIMIT) return fmt(value, metric.digits); // the limit is no peer
      const best = bestPeer(results, scenario.id, metric.key, metric.better);
      return `${fmt(value, metric.digits)} (${fmt(value / (best?.value ?? NaN), 2)})`;
    }),
  ]);
  return [
    `## ${scenario.title}`,
    '',
    scenario.method(scenario.params[mode]),
    '',
    'In brackets: the figure ÷ the best peer\'s (for times lower is better, for rates and shares higher).',
    '',
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((cells) => `| ${cells.join(' | ')} |`),
    '',
    ...(scenario.explain && results.repetitions(scenario.id, OURS) > 0 ? [...scenario.explain((library, key) => results.median(scenario.id, library, key)), ''] : []),
    ...(image ? [image, ''] : []),
  ];
}

function rawSection(results: Results, scenario: Scenario): string[] {
  const lines = [...LIBRARIES, LIMIT].filter((id) => results.repetitions(scenario.id, id) > 0).flatMap((library) =>
    scenario.metrics.map((metric) => {
      const values = results.values(scenario.id, library, metric.key).map((v) => fmt(v, metric.digits));
      return `| ${scenario.id} | ${name(library)} | ${metric.label} | ${values.join(', ')} |`;
    }),
  );
  return lines.length ? ['| scenario | library | figure | repetitions |', '|---|---|---|---|', ...lines, ''] : [];
}

/** The last telemetry overhead section, markers included, followed by a blank line; nothing if none was written. */
function previousTelemetry(): string[] {
  return previousSection(TELEMETRY_MARKERS);
}

/** The last section between `markers`, markers included, followed by a blank line; nothing if none was written. */
function previousSection([start, end]: readonly [string, string]): string[] {
  const old = existsSync(RESULTS) ? readFileSync(RESULTS, 'utf8') : '';
  const from = old.indexOf(start);
  const to = old.indexOf(end);
  return from >= 0 && to > from ? [old.slice(from, to + end.length), ''] : [];
}

/** A kept section's chart links (relative to bench/RESULTS.md) made relative to the report written elsewhere. */
function relinked(text: string, reportPath: string | undefined): string {
  const results = fileURLToPath(RESULTS);
  if (!reportPath || reportPath === results) return text;
  const charts = relative(dirname(reportPath), `${dirname(results)}/charts`).split('\\').join('/');
  return text.replace(/^(!\[[^\]]*\]\()charts\//gm, `$1${charts}/`);
}

function previousNotes(): string {
  const [start, end] = NOTES;
  const old = existsSync(RESULTS) ? readFileSync(RESULTS, 'utf8') : '';
  const from = old.indexOf(start);
  const to = old.indexOf(end);
  const body = from >= 0 && to > from ? old.slice(from + start.length, to).trim() : '(none written yet: diagnose any target not met here)';
  return `${start}\n${body}\n${end}`;
}

function name(library: LibraryId): string {
  const display = createAdapter(library).name;
  return library === OURS ? `**${display}**` : display;
}

function status(met: boolean | undefined): string {
  return met === undefined ? 'not run' : met ? 'met' : 'NOT MET';
}

/**
 * `report` with `section` (markers included) in place of the one between the same markers, or,
 * the first time, before the hand-written notes: for the scripts that write one section each.
 */
export function withSection(report: string, section: string, [start, end]: readonly [string, string]): string {
  const from = report.indexOf(start);
  const to = report.indexOf(end);
  if (from >= 0 && to > from) return report.slice(0, from) + section + report.slice(to + end.length);
  const notes = report.indexOf('## Notes on the run');
  if (notes >= 0) return `${report.slice(0, notes)}${section}\n\n${report.slice(notes)}`;
  return report.trim() ? `${report.trimEnd()}\n\n${section}\n` : `${section}\n`;
}

export function fmt(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toLocaleString('en', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : '–';
}
