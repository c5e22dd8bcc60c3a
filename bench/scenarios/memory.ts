import { OURS, createAdapter } from '../adapters/index.js';
import type { LockAdapter } from '../adapters/lock-adapter.js';
import type { Scenario } from './scenario.js';

interface Params {
  /** Cycles for nestjs-redlock; the peers stop at `checkpoint` to keep the run short. */
  cycles: number;
  checkpoint: number;
  warmup: number;
  callers: number;
  ttlMs: number;
}

const MB = 1024 * 1024;

/** Scenario 5: does a long-lived instance keep anything per lock it has released? */
export const memory: Scenario<Params> = {
  id: 'memory',
  title: '5. Memory: acquire/release cycles, heap before and after',
  method: (p) =>
    `${p.callers} concurrent callers, a fresh key per cycle, ttl ${p.ttlMs} ms, auto-pipelining on, ` +
    `${p.warmup} unmeasured cycles first. Heap = process.memoryUsage().heapUsed after two ` +
    `global.gc() (child run with --expose-gc). nestjs-redlock runs ${p.cycles.toLocaleString('en')} ` +
    `cycles; the peers ${p.checkpoint.toLocaleString('en')} (a million would take them minutes each), ` +
    `so every library has a figure after ${p.checkpoint.toLocaleString('en')}.`,
  metrics: [
    { key: 'heapBeforeMB', label: 'heap before (MB)', better: 'lower', digits: 1, informational: true },
    { key: 'growthCheckpointMB', label: 'growth after checkpoint (MB)', better: 'lower', digits: 2, informational: true },
    { key: 'growthMB', label: 'growth after all cycles (MB)', better: 'lower', digits: 2, informational: true },
    { key: 'cycles', label: 'cycles', better: 'higher', digits: 0, informational: true },
    { key: 'cyclesPerSec', label: 'cycles/s', better: 'higher', digits: 0, informational: true },
  ],
  params: {
    full: { cycles: 1_000_000, checkpoint: 100_000, warmup: 10_000, callers: 100, ttlMs: 10_000 },
    smoke: { cycles: 2_000, checkpoint: 1_000, warmup: 200, callers: 20, ttlMs: 10_000 },
  },

  async run({ library, urls, params }) {
    const gc = globalThis.gc;
    if (!gc) throw new Error('scenario memory needs node --expose-gc');
    const heap = () => (gc(), gc(), process.memoryUsage().heapUsed / MB);
    const adapter = createAdapter(library);
    await adapter.setup(urls, { autoPipelining: true });
    try {
      const prefix = `bench:memory:${process.pid}`;
      await cycles(adapter, `${prefix}:warmup`, params.warmup, params);
      const before = heap();
      const start = performance.now();
      await cycles(adapter, `${prefix}:a`, params.checkpoint, params);
      const atCheckpoint = heap();
      const total = library === OURS ? params.cycles : params.checkpoint;
      await cycles(adapter, `${prefix}:b`, total - params.checkpoint, params);
      const seconds = (performance.now() - start) / 1000;
      return {
        heapBeforeMB: before,
        growthCheckpointMB: atCheckpoint - before,
        growthMB: heap() - before,
        cycles: total,
        cyclesPerSec: total / seconds,
      };
    } finally {
      await adapter.close();
    }
  },
};

/** `count` acquire+release cycles over `callers` concurrent loops, a new key each time. */
async function cycles(adapter: LockAdapter, prefix: string, count: number, params: Params): Promise<void> {
  let next = 0;
  const caller = async () => {
    while (next < count) {
      const key = `${prefix}:${next++}`;
      await adapter.release(await adapter.acquire(key, params.ttlMs));
    }
  };
  await Promise.all(Array.from({ length: params.callers }, caller));
}
