import { setTimeout as sleep } from 'node:timers/promises';
import { createAdapter, type LibraryId } from '../adapters/index.js';
import type { Scenario } from './scenario.js';

interface Params {
  callers: number;
  warmupMs: number;
  durationMs: number;
  ttlMs: number;
}

/** Scenario 2: many independent callers, no contention: how many lock cycles per second. */
export const throughput: Scenario<Params> = {
  id: 'throughput',
  title: '2. 200 concurrent callers on distinct keys',
  method: (p) =>
    `${p.callers} callers in one process, each looping acquire+release on its own key for ` +
    `${p.durationMs / 1000} s after ${p.warmupMs / 1000} s of warm-up, ttl ${p.ttlMs} ms. Measured twice ` +
    'per run, with fresh clients: with ioredis auto-pipelining (the target) and without. CPU per cycle: ' +
    "the measuring process's own user+system time (`process.cpuUsage()`, every thread: the library, its " +
    "ioredis clients, V8's helpers) over the measured window alone, ÷ the cycles completed in it.",
  metrics: [
    { key: 'pipelined', label: 'cycles/s, auto-pipelining', better: 'higher', digits: 0 },
    { key: 'plain', label: 'cycles/s, plain clients', better: 'higher', digits: 0 },
    { key: 'cpuPipelined', label: 'CPU per cycle (µs), auto-pipelining', better: 'lower', digits: 1 },
    { key: 'cpuPlain', label: 'CPU per cycle (µs), plain clients', better: 'lower', digits: 1 },
    { key: 'errors', label: 'failed acquires', better: 'lower', digits: 0, informational: true },
  ],
  params: {
    full: { callers: 200, warmupMs: 1000, durationMs: 4000, ttlMs: 10_000 },
    smoke: { callers: 20, warmupMs: 200, durationMs: 500, ttlMs: 10_000 },
  },

  async run({ library, urls, params }) {
    const plain = await measure(library, urls, params, false);
    const pipelined = await measure(library, urls, params, true);
    return {
      pipelined: pipelined.rate,
      plain: plain.rate,
      cpuPipelined: pipelined.cpuPerCycle,
      cpuPlain: plain.cpuPerCycle,
      errors: plain.errors + pipelined.errors,
    };
  },
};

interface Measured {
  rate: number;
  /** µs of this process's user+system CPU per cycle completed in the window. */
  cpuPerCycle: number;
  errors: number;
}

async function measure(library: LibraryId, urls: readonly string[], params: Params, autoPipelining: boolean): Promise<Measured> {
  const adapter = createAdapter(library);
  await adapter.setup(urls, { autoPipelining });
  const prefix = `bench:throughput:${process.pid}:${autoPipelining}`;
  let cycles = 0;
  let errors = 0;
  let running = true;
  const caller = async (index: number) => {
    const key = `${prefix}:${index}`;
    while (running) {
      try {
        await adapter.release(await adapter.acquire(key, params.ttlMs));
        cycles++;
      } catch {
        errors++;
      }
    }
  };
  try {
    const callers = Array.from({ length: params.callers }, (_, index) => caller(index));
    await sleep(params.warmupMs);
    const before = cycles;
    const start = performance.now();
    // Over the same window as the rate: not the warm-up, not the callers' wind-down or close().
    const cpuAtStart = process.cpuUsage();
    await sleep(params.durationMs);
    const cpu = process.cpuUsage(cpuAtStart);
    const done = cycles - before;
    const rate = (done * 1000) / (performance.now() - start);
    running = false;
    await Promise.all(callers);
    return { rate, cpuPerCycle: (cpu.user + cpu.system) / done, errors };
  } finally {
    await adapter.close();
  }
}
