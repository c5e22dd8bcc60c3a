import { performance } from 'node:perf_hooks';
import { createAdapter } from '../adapters/index.js';
import { ascending, percentile } from '../support/stats.js';
import type { Scenario } from './scenario.js';

interface Params {
  /** Cycles before the early figure starts: connections, first script loads. */
  earlyFrom: number;
  /** Cycles before the measured ones; from `earlyFrom` on they make the early figure. */
  warmup: number;
  cycles: number;
  ttlMs: number;
}

/** Scenario 1: what one caller pays per lock, nothing else running. */
export const latency: Scenario<Params> = {
  id: 'latency',
  title: '1. One caller, acquire + release on fresh keys',
  method: (p) =>
    `${p.cycles} sequential acquire+release cycles on a new key each, after ${p.warmup} others, ` +
    `ttl ${p.ttlMs} ms, no auto-pipelining. Latency of the whole cycle, and of the acquire alone. ` +
    `The warm-up lets V8 finish optimising each library's code, as in a process that has been up ` +
    `for a second; "early p50" is the cycle p50 during it (cycles ${p.earlyFrom}–${p.warmup}), what a ` +
    `freshly started process pays. CPU per cycle: the measuring process's own user+system time ` +
    '(`process.cpuUsage()`, every thread: the library, its ioredis clients, V8\'s helpers) from the first ' +
    `measured cycle's start to the last one's end, ÷ ${p.cycles}.`,
  metrics: [
    { key: 'cycleP50', label: 'cycle p50 (ms)', better: 'lower', digits: 3 },
    { key: 'cycleP99', label: 'cycle p99 (ms)', better: 'lower', digits: 3 },
    { key: 'acquireP50', label: 'acquire p50 (ms)', better: 'lower', digits: 3 },
    { key: 'earlyP50', label: 'early p50 (ms)', better: 'lower', digits: 3 },
    { key: 'cpuPerCycle', label: 'CPU per cycle (µs)', better: 'lower', digits: 1 },
  ],
  params: {
    full: { earlyFrom: 500, warmup: 3000, cycles: 4000, ttlMs: 10_000 },
    smoke: { earlyFrom: 10, warmup: 30, cycles: 100, ttlMs: 10_000 },
  },

  async run({ library, urls, params }) {
    const adapter = createAdapter(library);
    await adapter.setup(urls, { autoPipelining: false });
    const prefix = `bench:latency:${process.pid}:${Date.now()}`;
    const cycles: number[] = [];
    const acquires: number[] = [];
    const early: number[] = [];
    // Read at the first measured cycle, so neither process start nor the warm-up counts.
    let cpuAtStart: NodeJS.CpuUsage | undefined;
    let cpu: NodeJS.CpuUsage | undefined;
    try {
      for (let i = 0; i < params.warmup + params.cycles; i++) {
        if (i === params.warmup) cpuAtStart = process.cpuUsage();
        const start = performance.now();
        const handle = await adapter.acquire(`${prefix}:${i}`, params.ttlMs);
        const acquired = performance.now();
        await adapter.release(handle);
        if (i < params.warmup) {
          if (i >= params.earlyFrom) early.push(performance.now() - start);
          continue;
        }
        cycles.push(performance.now() - start);
        acquires.push(acquired - start);
      }
      // Before close(): disconnecting is no part of a cycle.
      cpu = process.cpuUsage(cpuAtStart);
    } finally {
      await adapter.close();
    }
    const sortedCycles = ascending(cycles);
    return {
      cycleP50: percentile(sortedCycles, 50),
      cycleP99: percentile(sortedCycles, 99),
      acquireP50: percentile(ascending(acquires), 50),
      earlyP50: percentile(ascending(early), 50),
      cpuPerCycle: cpu ? (cpu.user + cpu.system) / params.cycles : Number.NaN,
    };
  },
};
