import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, expect, it } from 'vitest';
import type { Hold } from './support/checker.js';
import type { HistoryEvent } from './support/history.js';
import type { EngineSettings, RedlockApiConfig, WorkerConfig } from './support/protocol.js';
import { failures, runFor, type SafetyRun, timeoutFor } from './support/safety-run.js';
import { scenarioFixture } from './support/scenario-fixture.js';
import { attempts, loopWorker, range } from './support/scenario-kit.js';

// Issue 31's rolling switch: processes on node-redlock (the `redlock` package itself, 5.0.0-beta.2)
// and processes on this package contend for the same few resources, on the same 3 masters, under
// the history checker. With the compatible key format (`nestjs-redlock/node-redlock`, and the
// engine with keyFormat 'node-redlock') they must exclude each other: 0 overlaps, 0 lost updates,
// while each library took the lock many times and waited for the other's holds. The control runs
// our side with the default key format (`redlock:<resource>`): node-redlock's keys and ours never
// meet, both hold one resource at once, and the checker must see it.
//
// Holds of node-redlock are judged on its own promise, `expiration` (before its first round, plus
// the duration, less the drift), turned into the shared monotonic clock where the worker reads it
// (redlock-api-worker.ts). Their acquires are not single rounds, so the checker's single-round
// validity-excess rule (the engine's promise) does not apply to them; extends are judged as any
// other (node-redlock's new expiration counts from before the call, within the rule); overlap and
// lost-update are judged for every hold.

const TTLS = [300, 600, 1_000];
const MIXED_MS = 8_000;
const CONTROL_MS = 3_000;
/** Generous for a loaded 2-core machine: a quiet run gets hundreds per library. */
const MIN_HOLDS = 20;
const MIN_CONTENDED = 10;

const fixture = scenarioFixture({ masters: 3 });
/** Every run of the file, disposed after its test even when it fails (the fixture disposes only the last). */
const runs: SafetyRun[] = [];
afterEach(async () => {
  await Promise.all(runs.splice(0).map((run) => run.dispose()));
});

type Library = 'redlock' | 'entry' | 'native';
const LIBRARIES: readonly Library[] = ['redlock', 'entry', 'native'];
const libraryOf = (proc: string): Library => proc.replace(/-\d+$/, '') as Library;
/** node-redlock's side, or this package's (the entry point and the engine alike). */
const sideOf = (proc: string) => (libraryOf(proc) === 'redlock' ? 'node-redlock' : 'ours');

function apiWorker(proc: string, library: RedlockApiConfig['library'], urls: string[], resources: string[], engine: EngineSettings = {}): WorkerConfig {
  return {
    proc,
    urls,
    workers: 2,
    resources,
    mode: 'loop',
    ttlMs: TTLS,
    engine,
    holdMs: 5,
    pauseMs: 15,
    redlockApi: { library, retryCount: 20, retryDelay: 25, retryJitter: 15, extendShare: 0.3 },
  };
}

/** 2 processes on node-redlock, 2 on the entry point, 1 on the engine: 2 loops each, every one on every resource. */
async function spawnFleet(scenario: SafetyRun, resources: string[], keyFormat: 'prefixed' | 'node-redlock'): Promise<void> {
  const urls = fixture.masters().urls();
  await Promise.all([
    ...range(2).map((p) => scenario.spawn(apiWorker(`redlock-${p}`, 'redlock', urls, resources))),
    // The entry point's engine options: its compatible defaults, or the default key format.
    ...range(2).map((p) => scenario.spawn(apiWorker(`entry-${p}`, 'entry', urls, resources, keyFormat === 'prefixed' ? { keyFormat } : {}))),
    scenario.spawn(
      loopWorker('native-0', urls, {
        resources,
        ttlMs: TTLS,
        extend: true,
        detachedReentry: 0,
        engine: { restartQuarantineMs: false, ...(keyFormat === 'node-redlock' ? { keyFormat } : {}) },
      }),
    ),
  ]);
}

interface MixReport {
  holds: Record<Library, number>;
  /**
   * Acquire calls of each library during which the other side held the resource (node-redlock's
   * for ours, ours for node-redlock's): it was refused and waited, or gave up.
   */
  contended: Record<Library, number>;
  /** Of those, the ones that ended in a failure (node-redlock's retry window ran out, say). */
  contendedFailed: Record<Library, number>;
  /** Holds of different sides (node-redlock, ours) / of one side whose windows intersect. */
  crossOverlaps: number;
  sameSideOverlaps: number;
  line: string;
}

const zero = (): Record<Library, number> => ({ redlock: 0, entry: 0, native: 0 });

function mixReport(events: readonly HistoryEvent[], holds: readonly Hold[]): MixReport {
  const report: MixReport = { holds: zero(), contended: zero(), contendedFailed: zero(), crossOverlaps: 0, sameSideOverlaps: 0, line: '' };
  const windows = holds.filter((h) => h.end > h.okAt).sort((a, b) => (a.okAt < b.okAt ? -1 : a.okAt > b.okAt ? 1 : 0));
  for (const hold of windows) report.holds[libraryOf(hold.proc)]++;
  const longest = windows.reduce((most, h) => (h.end - h.okAt > most ? h.end - h.okAt : most), 0n);
  /** The windows on `resource` that intersect [from, to) and that `keep` keeps. */
  const during = (resource: string, from: bigint, to: bigint, keep: (h: Hold) => boolean) => {
    let lo = 0;
    let hi = windows.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (windows[mid]!.okAt < from - longest) lo = mid + 1;
      else hi = mid;
    }
    const found: Hold[] = [];
    for (let i = lo; i < windows.length && windows[i]!.okAt < to; i++) {
      const h = windows[i]!;
      if (h.resource === resource && h.end > from && keep(h)) found.push(h);
    }
    return found;
  };
  for (const { invoke, end } of attempts(events)) {
    if (!end || !invoke.resource) continue;
    const library = libraryOf(invoke.proc);
    if (!LIBRARIES.includes(library)) continue;
    if (during(invoke.resource, invoke.t, end.t, (h) => sideOf(h.proc) !== sideOf(invoke.proc)).length === 0) continue;
    report.contended[library]++;
    if (end.phase !== 'ok') report.contendedFailed[library]++;
  }
  for (const hold of windows) {
    for (const other of during(hold.resource, hold.okAt, hold.end, (h) => h.token !== hold.token && h.okAt >= hold.okAt)) {
      if (sideOf(other.proc) === sideOf(hold.proc)) report.sameSideOverlaps++;
      else report.crossOverlaps++;
    }
  }
  const per = (counts: Record<Library, number>) => LIBRARIES.map((l) => `${l} ${counts[l]}`).join(', ');
  report.line =
    `holds: ${per(report.holds)}; acquires while the other side (node-redlock / ours) held the resource: ${per(report.contended)} ` +
    `(of which failed: ${per(report.contendedFailed)}); overlapping pairs: ${report.crossOverlaps} node-redlock/ours, ${report.sameSideOverlaps} within a side`;
  return report;
}

it('node-redlock processes and processes on the compatible key format exclude each other (0 overlaps)', async () => {
  const scenario = fixture.start({
    id: 'mixed-fleet',
    title: 'Mixed fleet: node-redlock 5 and nestjs-redlock/node-redlock on one resource set',
    expected: 'safe',
    method:
      `3 masters; 2 processes on the redlock package (5.0.0-beta.2), 2 on nestjs-redlock/node-redlock, 1 on the engine with ` +
      `keyFormat 'node-redlock', 2 loops each on 2 resources (ttl ${TTLS.join('/')} ms, retryDelay 25 ± 15 ms); a third of the ` +
      'API cycles and every engine cycle extend once. No faults: what is tested is that the key formats meet.',
  });
  runs.push(scenario);
  await spawnFleet(scenario, ['mix-a', 'mix-b'], 'node-redlock');
  await sleep(runFor(MIXED_MS));
  await scenario.stopWorkers();

  const check = scenario.check();
  const mix = mixReport(scenario.history.events(), check.holds);
  for (const library of LIBRARIES) {
    scenario.expect(`${library} processes held the lock at least ${MIN_HOLDS} times (${mix.holds[library]})`, mix.holds[library] >= MIN_HOLDS, mix.line);
    scenario.expect(
      `${library} processes asked for the lock while the other side held it at least ${MIN_CONTENDED} times (${mix.contended[library]})`,
      mix.contended[library] >= MIN_CONTENDED,
      mix.line,
    );
  }
  scenario.expect('the libraries shared the store: writes under the lock', check.stats.plainWrites >= MIN_HOLDS, `${check.stats.plainWrites} writes`);
  const result = await scenario.finish();
  console.log(`[safety] mixed-fleet: ${mix.line}`);
  expect(failures(result)).toBe('');
  expect(result.counts.overlap).toBe(0);
  expect(result.counts['lost-update']).toBe(0);
}, timeoutFor(MIXED_MS));

it('control: with the default key format (redlock:<resource>) node-redlock processes and ours hold one resource at once', async () => {
  const scenario = fixture.start({
    id: 'mixed-fleet-control',
    title: 'Mixed fleet with the default key format on our side (control)',
    expected: 'unsafe',
    method: "As mixed-fleet, with keyFormat 'prefixed' (the default) for the entry point and the engine: their keys are redlock:<resource>.",
  });
  runs.push(scenario);
  await spawnFleet(scenario, ['ctl-a', 'ctl-b'], 'prefixed');
  await sleep(runFor(CONTROL_MS));
  await scenario.stopWorkers();

  const check = scenario.check();
  const mix = mixReport(scenario.history.events(), check.holds);
  scenario.expect(`node-redlock's holds and ours overlapped (${mix.crossOverlaps} pairs)`, mix.crossOverlaps > 0, mix.line);
  // Each side still excludes itself: what the checker finds is the key formats not meeting.
  scenario.expect(`no overlap within a side (${mix.sameSideOverlaps} pairs)`, mix.sameSideOverlaps === 0, mix.line);
  const result = await scenario.finish();
  console.log(`[safety] mixed-fleet-control: ${result.counts.overlap} overlaps, ${result.counts['lost-update']} lost updates; ${mix.line}`);
  expect(failures(result)).toBe('');
  expect(result.counts.overlap).toBeGreaterThanOrEqual(1);
}, timeoutFor(CONTROL_MS));
