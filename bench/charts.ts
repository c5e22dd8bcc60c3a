import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { SCENARIOS } from './scenarios/index.js';
import { type Chart, chartsDirFor, IMAGE_LINE, imageLink, scenarioBarChart, SCENARIO_HEADLINES, writeCharts } from './support/charts.js';
import {
  type Curve,
  hotKeyChart,
  hotKeyCostChart,
  latencyRttChart,
  LIMIT_CURVE,
  mastersChart,
  mastersPanel,
  processesPanel,
  type ScalingSource,
} from './support/scaling-charts.js';

/**
 * `npm run bench:charts [-- --file REPORT.md]`: the charts of a report drawn again from the numbers
 * in its Markdown tables, without measuring anything: the scenario bar charts (medians from each
 * scenario's table, whiskers from "Every repetition") and the scaling sweeps' line charts (from
 * the scaling section's tables). Writes them where the run would (bench/charts/ for
 * bench/RESULTS.md, else `<report>.charts/` beside the report) and puts each image under the
 * table it pictures, replacing the images it put there before. It changes nothing else in the file.
 */
const { values: args } = parseArgs({ options: { file: { type: 'string' } } });
const RESULTS = fileURLToPath(new URL('./RESULTS.md', import.meta.url));
const file = args.file ? resolve(args.file) : RESULTS;
const dir = chartsDirFor(file, file === RESULTS);
const prefix = `](${relative(dirname(file), dir).split('\\').join('/')}/`;

// Our previous images (and the blank line written before each) go first: the file as the run left it.
const original = readFileSync(file, 'utf8').split('\n');
const lines: string[] = [];
for (const line of original) {
  if (IMAGE_LINE.test(line) && line.includes(prefix)) {
    if (lines.at(-1) === '') lines.pop();
    continue;
  }
  lines.push(line);
}

interface Table {
  /** Index of its last line. */
  end: number;
  header: string[];
  rows: string[][];
  /** The last line of text before it (a paragraph such as "**Round trip 0 ms:**"). */
  before: string;
  /** Its "## " and "### " headings. */
  section: string;
  subsection: string;
}

const tables: Table[] = [];
{
  let section = '';
  let subsection = '';
  let before = '';
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith('## ')) [section, subsection] = [line.slice(3), ''];
    else if (line.startsWith('### ')) subsection = line.slice(4);
    if (!line.startsWith('|')) {
      if (line.trim()) before = line;
      continue;
    }
    const start = i;
    while (lines[i + 1]?.startsWith('|')) i++;
    const [header, , ...rows] = lines.slice(start, i + 1).map(cells);
    tables.push({ end: i, header: header!, rows, before, section, subsection });
  }
}

/** Images to put after a line: [line index, image]. */
const inserts: [number, string][] = [];
const charts: Chart[] = [];
const place = (chart: Chart, after: number) => {
  charts.push(chart);
  inserts.push([after, imageLink(chart, dir, file)]);
};

scenarioCharts();
scalingCharts();

await writeCharts(dir, charts);
const out: string[] = [];
for (const [i, line] of lines.entries()) {
  out.push(line);
  for (const [after, image] of inserts) if (after === i) out.push('', image);
}
writeFileSync(file, out.join('\n'));
console.log(`${charts.length} chart(s) in ${dir}; ${inserts.length} image link(s) in ${file}`);

function cells(line: string): string[] {
  return line.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((cell) => cell.trim());
}

/** The number a cell shows first: "12,669 (2.41)" -> 12669, "–" -> NaN. */
function number(cell: string | undefined): number {
  const first = (cell ?? '').replace(/\*\*/g, '').trim().split(/\s/)[0]!.replace(/,/g, '');
  return first === '' || first === '–' ? Number.NaN : Number(first);
}

function plain(cell: string): string {
  return cell.replace(/\*\*/g, '').trim();
}

/** The first line matching, its index and match. */
function find(pattern: RegExp, from = 0, to = lines.length): { index: number; match: RegExpExecArray } | undefined {
  for (let i = from; i < to; i++) {
    const match = pattern.exec(lines[i]!);
    if (match) return { index: i, match };
  }
  return undefined;
}

function scenarioCharts(): void {
  const written = find(/^Written by `npm run bench` \(bench\/run\.ts\) on (\S+ \S+) UTC: (\w+) run, (\d+) repetition/);
  if (!written) return;
  const [, when, mode, reps] = written.match;
  // "| hot-key | **nestjs-redlock** | holds | 4,526, 4,410 |": every repetition, by scenario, library and figure.
  const repetitions = new Map<string, number[]>();
  for (const table of tables.filter((t) => t.section === 'Every repetition')) {
    for (const [id, library, figure, values] of table.rows) {
      repetitions.set(`${id}|${plain(library!)}|${figure}`, values!.split(', ').map((value) => number(value)));
    }
  }
  for (const scenario of SCENARIOS) {
    const headline = SCENARIO_HEADLINES[scenario.id];
    const table = tables.find((t) => t.section === scenario.title);
    if (!headline || !table) continue;
    const column = table.header.indexOf(headline.label);
    if (column < 0) continue;
    // Scenario 3's holds are counted over its window: "loop on ONE key for 12 s".
    const heading = find(new RegExp(`^## ${scenario.title.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`));
    const window = heading && find(/ for ([\d.]+) s[;,.]/, heading.index, table.end);
    const chart = scenarioBarChart({
      scenarioId: scenario.id,
      sectionTitle: scenario.title,
      source: `npm run bench, ${when} UTC, ${mode} run`,
      reps: Number(reps),
      rows: table.rows.map((row) => {
        const library = plain(row[0]!);
        return {
          library,
          ours: row[0]!.includes('**'),
          limit: library.startsWith('the limit'),
          median: number(row[column]),
          values: repetitions.get(`${scenario.id}|${library}|${headline.label}`) ?? [],
        };
      }),
      ...(window ? { windowS: Number(window.match[1]) } : {}),
    });
    if (chart) place(chart, table.end);
  }
}

function scalingCharts(): void {
  const written = find(/^Written by `npm run bench:scaling` \(bench\/scaling\.ts\) on (\S+ \S+) UTC: (\w+) run[^,]*, (\d+) repetition/);
  if (!written) return;
  const source: ScalingSource = { when: written.match[1]!, mode: written.match[2]!, reps: Number(written.match[3]) };
  const rttOf = (table: Table) => Number(/^\*\*Round trip ([\d.]+) ms/.exec(table.before)?.[1] ?? Number.NaN);
  // The round trip of a masters table is the bold line above the table before it.
  const scaling = tables.filter((t) => t.section.startsWith('Scaling'));

  const masters = scaling.filter((t) => t.subsection.startsWith('Acquire + release against the number of masters'));
  const byRtt = new Map<number, { table: Table; curves: Curve[] }>();
  for (const [i, table] of masters.entries()) {
    if (!table.before.startsWith('Every library, cycle p50')) continue;
    const rtt = rttOf(masters[i - 1]!);
    if (!Number.isFinite(rtt)) continue;
    const counts = table.header.slice(1).map(Number);
    const curves = table.rows.map((row) => ({
      name: plain(row[0]!),
      ours: row[0]!.includes('**'),
      points: counts.map((count, c) => ({ x: count, y: number(row[c + 1]) })),
    }));
    byRtt.set(rtt, { table, curves });
    place(mastersChart(rtt, source, curves), table.end);
  }
  if (byRtt.size > 1) {
    const names = [...new Set([...byRtt.values()].flatMap(({ curves }) => curves.map((curve) => curve.name)))];
    const curves = names.map((name) => ({
      name,
      ours: [...byRtt.values()].some(({ curves }) => curves.some((curve) => curve.name === name && curve.ours)),
      points: [...byRtt.entries()].flatMap(([rtt, { curves }]) =>
        (curves.find((curve) => curve.name === name)?.points ?? []).map((point) => ({ panel: mastersPanel(point.x), x: rtt, y: point.y })),
      ),
    }));
    place(latencyRttChart(source, curves), subsectionEnd('### Acquire + release against the number of masters'));
  }

  const hot = scaling.filter((t) => t.subsection.startsWith('Hot key against the number of processes'));
  const peer = find(/\. ([^.]+?) is the best peer of scenarios 3 and 3a/)?.match[1] ?? 'the best peer';
  const costs: { rtt: number; processes: number; ours: number; peer: number }[] = [];
  for (const table of hot) {
    const rtt = rttOf(table);
    if (!Number.isFinite(rtt)) continue;
    const col = (label: string) => table.header.indexOf(label);
    const processes = table.rows.map((row) => number(row[col('processes')]));
    const curve = (name: string, label: string, extra: Partial<Curve>): Curve => ({
      name,
      ...extra,
      points: table.rows.map((row, p) => ({ x: processes[p]!, y: number(row[col(label)]) })),
    });
    place(
      hotKeyChart(rtt, source, [
        curve('nestjs-redlock', 'ours holds/s', { ours: true }),
        curve(peer, 'peer holds/s', {}),
        curve(LIMIT_CURVE, 'the limit, holds/s', { reference: true }),
      ]),
      table.end,
    );
    for (const [p, row] of table.rows.entries()) {
      costs.push({ rtt, processes: processes[p]!, ours: number(row[col('ours cost per turn (ms)')]), peer: number(row[col('peer cost per turn (ms)')]) });
    }
  }
  if (new Set(costs.map((cost) => cost.rtt)).size > 1) {
    const curve = (name: string, which: 'ours' | 'peer'): Curve => ({
      name,
      ours: which === 'ours',
      points: costs.map((cost) => ({ panel: processesPanel(cost.processes), x: cost.rtt, y: cost[which] })),
    });
    place(hotKeyCostChart(source, [curve('nestjs-redlock', 'ours'), curve(peer, 'peer')]), subsectionEnd('### Hot key against the number of processes'));
  }
}

/** The last line of text of the subsection under this heading (before the next heading or marker). */
function subsectionEnd(heading: string): number {
  const start = lines.indexOf(heading);
  let last = start;
  for (let i = start + 1; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^#{1,3} |^<!--/.test(line)) break;
    if (line.trim()) last = i;
  }
  return last;
}
