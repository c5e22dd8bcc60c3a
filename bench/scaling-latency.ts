import { performance } from 'node:perf_hooks';
import { createAdapter, type LibraryId } from './adapters/index.js';
import type { LockAdapter } from './adapters/lock-adapter.js';
import { reportAndExit } from './support/ipc.js';
import { ascending, percentile } from './support/stats.js';

/**
 * One process of bench/scaling.ts's latency curve: one library, one round-trip time, every
 * number of masters (or the same masters direct and through the proxy, for the proxy's own
 * cost). Scenario 1's loop (one caller, acquire + release on a new key each) runs first over
 * the direct connections, to let V8 optimise the library's code without paying the
 * delay for thousands of cycles, then through `urls` (the delay proxy's, or the direct ones at
 * 0 ms) in blocks that take turns between the numbers of masters, so the machine's drift falls
 * on all of them alike. CPU time is this process's own (user + system), per cycle.
 */
export interface LatencyJob {
  library: LibraryId;
  /** The masters without the proxy, for the warm-up. */
  directUrls: string[];
  /** What is measured, taking turns: so many masters behind these URLs (the proxy's, or the direct ones). */
  targets: { masters: number; urls: string[] }[];
  /** Warm-up cycles in all, shared among the numbers of masters. */
  warmup: number;
  blocks: number;
  cyclesPerBlock: number;
  ttlMs: number;
}

export interface LatencyPoint {
  cycleP50: number;
  cycleP99: number;
  acquireP50: number;
  acquireP99: number;
  cpuUsPerCycle: number;
}

const job = JSON.parse(process.argv[2]!) as LatencyJob;
const prefix = `bench:scaling:${process.pid}:${Date.now()}`;
let serial = 0;

async function open(urls: readonly string[]): Promise<LockAdapter> {
  const adapter = createAdapter(job.library);
  await adapter.setup(urls, { autoPipelining: false });
  return adapter;
}

async function cycle(adapter: LockAdapter, into?: { cycles: number[]; acquires: number[] }): Promise<void> {
  const start = performance.now();
  const handle = await adapter.acquire(`${prefix}:${serial++}`, job.ttlMs);
  const acquired = performance.now();
  await adapter.release(handle);
  into?.cycles.push(performance.now() - start);
  into?.acquires.push(acquired - start);
}

const counts = [...new Set(job.targets.map((target) => target.masters))];
for (const masters of counts) {
  const warm = await open(job.directUrls.slice(0, masters));
  for (let i = 0; i < job.warmup / counts.length; i++) await cycle(warm);
  await warm.close();
}

const measured = await Promise.all(job.targets.map((target) => open(target.urls.slice(0, target.masters))));
// New connections: let each one load its scripts and settle before anything counts.
for (const adapter of measured) for (let i = 0; i < 20; i++) await cycle(adapter);
const samples = job.targets.map(() => ({ cycles: [] as number[], acquires: [] as number[], cpuUs: 0 }));
for (let block = 0; block < job.blocks; block++) {
  for (let turn = 0; turn < measured.length; turn++) {
    const index = (block + turn) % measured.length;
    const cpu = process.cpuUsage();
    for (let i = 0; i < job.cyclesPerBlock; i++) await cycle(measured[index]!, samples[index]);
    const used = process.cpuUsage(cpu);
    samples[index]!.cpuUs += used.user + used.system;
  }
}
await Promise.all(measured.map((adapter) => adapter.close()));

/** One point per target, in the job's order. */
const points: LatencyPoint[] = job.targets.map((_, i) => {
  const { cycles, acquires, cpuUs } = samples[i]!;
  const sortedCycles = ascending(cycles);
  const sortedAcquires = ascending(acquires);
  return {
    cycleP50: percentile(sortedCycles, 50),
    cycleP99: percentile(sortedCycles, 99),
    acquireP50: percentile(sortedAcquires, 50),
    acquireP99: percentile(sortedAcquires, 99),
    cpuUsPerCycle: cpuUs / cycles.length,
  };
});
reportAndExit(points);
