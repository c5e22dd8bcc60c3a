import { writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { RedisFleet } from '../test/support/redis-fleet.js';
import { connectMasters, disconnectAll } from '../test/support/masters.js';
import { LIBRARIES, OURS, type LibraryId } from './adapters/index.js';
import { renderReport, scenarioCharts, updateSummaryTable, utcMinute } from './report.js';
import { SCENARIOS, scenarioById } from './scenarios/index.js';
import type { Figures, Scenario } from './scenarios/scenario.js';
import { chartsDirFor, imageLink, writeCharts } from './support/charts.js';
import { engineSource, type EngineSource } from './support/machine.js';
import { FLEET_SETTLE_MS, measureInChild } from './support/measure.js';
import { Results } from './support/results.js';

/**
 * `npm run bench [-- --reps N] [-- --only latency,hot-key] [-- --libraries nestjs-redlock,limit]`, `npm run bench:smoke`.
 * One fleet of 5 redis-server masters for the whole run, and a sixth redis-server as the store that
 * scenario 3a's critical sections read and write. Each repetition runs every scenario
 * for every library, the libraries in an order rotated by one per repetition, so drift of the
 * machine over the run falls on all of them alike; each measurement is a fresh child process.
 */
const { values: args } = parseArgs({
  options: {
    smoke: { type: 'boolean', default: false },
    only: { type: 'string' },
    reps: { type: 'string' },
    out: { type: 'string' },
    libraries: { type: 'string' },
  },
});
const mode = args.smoke ? 'smoke' : 'full';
const reps = Number(args.reps ?? (args.smoke ? 1 : 3));
const scenarios = args.only ? args.only.split(',').map(scenarioById) : SCENARIOS;
const libraries = args.libraries?.split(',');
const official = !args.smoke && !args.only && !args.out && !libraries;
const out = args.out ?? (official ? fileURLToPath(new URL('./RESULTS.md', import.meta.url)) : join(tmpdir(), `nestjs-redlock-bench-${mode}.md`));

const started = Date.now();
const loadAtStart = loadavg()[0]!;
const engineAtStart = engineSource();
const results = new Results();
const fleet = await RedisFleet.start(6);
try {
  const urls = fleet.urls().slice(0, 5);
  const storeUrl = fleet.urls()[5]!;
  await sleep(FLEET_SETTLE_MS);
  const admin = await connectMasters(fleet.urls());
  for (let rep = 0; rep < reps; rep++) {
    for (const scenario of scenarios) {
      const ofScenario = scenario.libraries ?? LIBRARIES;
      // Another configuration of ours (`--libraries nestjs-redlock+node-redis`) runs wherever ours does.
      const variants = (libraries ?? []).filter((id) => id.startsWith(`${OURS}+`) && ofScenario.includes(OURS)) as LibraryId[];
      const listed = [...ofScenario.filter((id) => !libraries || libraries.includes(id)), ...variants];
      for (const library of rotate(listed, rep)) {
        const label = `[rep ${rep + 1}/${reps}] ${scenario.id} / ${library}`;
        try {
          const figures = await measure(scenario, library, urls, storeUrl);
          results.add(scenario.id, library, figures);
          console.log(`${label}: ${format(figures)}`);
        } catch (error) {
          results.failures.push(`${label}: ${(error as Error).message}`);
          console.error(`${label}: FAILED ${(error as Error).message}`);
        }
        // Every run starts on empty masters; a failed run may have left keys behind.
        await Promise.all(admin.map((client) => client.flushall()));
      }
    }
  }
  disconnectAll(admin);
} finally {
  await fleet.stopAll();
}

const minutes = (Date.now() - started) / 60_000;
const engine: [EngineSource, EngineSource] = [engineAtStart, engineSource()];
if (engine[0].digest !== engine[1].digest) console.warn(`lib/ changed during the run: ${engine[0].label} -> ${engine[1].label}`);
const when = utcMinute();
// The charts beside the report (bench/charts/ for the official run): a chart that fails to render costs its image, not the report.
const chartsDir = chartsDirFor(out, official);
const images = new Map<string, string>();
try {
  const charts = scenarioCharts(results, scenarios, mode, reps, when);
  await writeCharts(chartsDir, charts.map(([, chart]) => chart));
  for (const [id, chart] of charts) images.set(id, imageLink(chart, chartsDir, out));
} catch (error) {
  console.error(`charts: FAILED ${(error as Error).message}`);
}
const report = renderReport({ results, scenarios, mode, reps, minutes, load: [loadAtStart, loadavg()[0]!], engine, when, images, reportPath: out });
writeFileSync(out, report);
if (official) updateSummaryTable(report);
console.log(`\nwrote ${out}${official ? ' and the docs/benchmark.md table' : ''}${images.size ? `, ${images.size} chart(s) in ${chartsDir}` : ''}`);

function measure(scenario: Scenario, library: LibraryId, urls: string[], storeUrl: string): Promise<Figures> {
  return measureInChild({ scenario: scenario.id, library, urls, storeUrl, params: scenario.params[mode] });
}

function rotate<T>(list: readonly T[], by: number): T[] {
  const shift = by % list.length;
  return [...list.slice(shift), ...list.slice(0, shift)];
}

function format(figures: Figures): string {
  return Object.entries(figures)
    .map(([key, value]) => `${key}=${Number.isInteger(value) ? value : value.toFixed(3)}`)
    .join(' ');
}
