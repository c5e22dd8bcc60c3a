import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Results as ResultsType } from '../../bench/support/results.js';
import type { TargetRow } from '../../bench/targets.js';

// How bench/RESULTS.md judges the issues' targets (bench/targets.ts), on figures made up here: no
// Redis, no peer run. A wrong judgment would put a false "met" into the record.

type Figures = Record<string, number>;

/** A fresh copy of the bench modules: LIBRARIES depends on REDLOCK_BASE_DIR when they load. */
async function bench() {
  vi.resetModules();
  const { Results } = await import('../../bench/support/results.js');
  const { evaluateTargets } = await import('../../bench/targets.js');
  return { Results, evaluateTargets };
}

function fill(results: ResultsType, scenario: string, byLibrary: Record<string, Figures[]>): void {
  for (const [library, runs] of Object.entries(byLibrary)) for (const figures of runs) results.add(scenario, library as never, figures);
}

function row(rows: TargetRow[], scenario: string, figure: string): TargetRow {
  const found = rows.find((r) => r.scenario === scenario && r.figure.startsWith(figure));
  if (!found) throw new Error(`no target row ${scenario} / ${figure}`);
  return found;
}

afterEach(() => {
  vi.unstubAllEnvs();
});

describe('bench targets', () => {
  it('judges ours against the best peer on the medians of the repetitions', async () => {
    const { Results, evaluateTargets } = await bench();
    const results = new Results();
    fill(results, 'latency', {
      'nestjs-redlock': [{ cpuPerCycle: 170, cycleP50: 0.2 }, { cpuPerCycle: 180, cycleP50: 0.21 }, { cpuPerCycle: 900, cycleP50: 0.19 }],
      redlock: [{ cpuPerCycle: 160, cycleP50: 0.22 }, { cpuPerCycle: 158, cycleP50: 0.2 }, { cpuPerCycle: 165, cycleP50: 0.23 }],
      'redis-semaphore': [{ cpuPerCycle: 200, cycleP50: 0.3 }],
    });
    const rows = evaluateTargets(results);
    // Medians: ours 180 µs against redlock's 160 (the best peer): 1.125×, not met, whatever one outlier did.
    const cpu = row(rows, '1 one caller', 'CPU per cycle');
    expect(cpu.ours).toBe(180);
    expect(cpu.bestPeer).toEqual({ library: 'redlock', value: 160 });
    expect(cpu.ratio).toBeCloseTo(1.125, 6);
    expect(cpu.met).toBe(false);
    // p50: ours 0.2 against redlock's 0.22: met.
    expect(row(rows, '1 one caller', 'acquire+release p50').met).toBe(true);
    // A scenario that did not run is neither met nor missed.
    expect(row(rows, '2 200 callers', 'cycles/s').met).toBeUndefined();
  });

  it('never takes the base engine of a side-by-side run for a peer', async () => {
    vi.stubEnv('REDLOCK_BASE_DIR', '/nonexistent/base-checkout');
    const { Results, evaluateTargets } = await bench();
    const results = new Results();
    fill(results, 'latency', {
      'nestjs-redlock': [{ cpuPerCycle: 170 }],
      'nestjs-redlock@base': [{ cpuPerCycle: 150 }],
      redlock: [{ cpuPerCycle: 175 }],
    });
    const cpu = row(evaluateTargets(results), '1 one caller', 'CPU per cycle');
    expect(cpu.bestPeer?.library).toBe('redlock');
    expect(cpu.met).toBe(true);
  });

  it('fails a bound on holders at once if any one repetition broke it, whatever the median', async () => {
    const { Results, evaluateTargets } = await bench();
    const results = new Results();
    fill(results, 'hot-semaphore', {
      'nestjs-redlock': [{ throughput: 1200, mostAtOnce: 4 }, { throughput: 1250, mostAtOnce: 5 }, { throughput: 1300, mostAtOnce: 4 }],
      'redis-semaphore': [{ throughput: 1000, mostAtOnce: 6 }],
      limit: [{ throughput: 1800, mostAtOnce: 4 }],
    });
    const rows = evaluateTargets(results);
    const most = row(rows, '3b hot semaphore', 'most holders at once');
    expect(most.ours).toBe(5);
    expect(most.met).toBe(false);
    // 1,250 of the limit's 1,800 is 0.694: met, and ahead of redis-semaphore's 1,000.
    expect(row(rows, '3b hot semaphore', 'holds/s, share').ours).toBeCloseTo(1250 / 1800, 6);
    expect(row(rows, '3b hot semaphore', 'holds/s, share').met).toBe(true);
    expect(row(rows, '3b hot semaphore', 'holds/s').met).toBe(true);
  });

  it('does not call a read-write share met when writers were cut off', async () => {
    const { Results, evaluateTargets } = await bench();
    const results = new Results();
    const run = (censored: number) => ({ throughput: 1500, writeWaitP99: 20, censored, failures: 0 });
    fill(results, 'rw-read-heavy', { 'nestjs-redlock': [run(2)], limit: [{ throughput: 2000, writeWaitP99: 10 }] });
    fill(results, 'rw-write-heavy', { 'nestjs-redlock': [run(0)], limit: [{ throughput: 2000, writeWaitP99: 10 }] });
    const rows = evaluateTargets(results);
    expect(row(rows, '3c read-heavy', 'holds/s').met).toBe(false);
    expect(row(rows, '3d write-heavy', 'holds/s').met).toBe(true);
  });
});
