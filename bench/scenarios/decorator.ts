import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { OURS } from '../adapters/index.js';
import { connect, disconnect } from '../support/clients.js';
import { nextMessage } from '../support/ipc.js';
import { ascending, percentile } from '../support/stats.js';
import type { LoadJob, LoadReport } from './http-load.js';
import type { Scenario } from './scenario.js';

interface Params {
  concurrency: number;
  blocks: number;
  blockMs: number;
  warmupMs: number;
}

const LOAD = fileURLToPath(new URL('./http-load.ts', import.meta.url));

/** Scenario 4: what @WithLock costs over RedlockService.using written by hand, over HTTP. */
export const decorator: Scenario<Params> = {
  id: 'decorator',
  title: '4. @WithLock route versus RedlockService.using by hand',
  method: (p) =>
    'A Nest 12 app (express) with RedlockModule and two GET routes doing the same locked work ' +
    "(one awaited resolved promise), one `@WithLock('bench:{0}')`, one calling `RedlockService.using` " +
    `itself; a new key per request. ${p.concurrency} keep-alive HTTP callers in a separate process, ` +
    `${p.blocks} blocks of ${p.blockMs / 1000} s per route alternating ABBA, after ${p.warmupMs / 1000} s ` +
    'of warm-up on each. Overhead = by-hand req/s ÷ decorated req/s − 1. nestjs-redlock only: ' +
    'the peers have no Nest layer.',
  libraries: [OURS],
  metrics: [
    { key: 'decoratedRps', label: '@WithLock req/s', better: 'higher', digits: 0, informational: true },
    { key: 'byHandRps', label: 'using by hand req/s', better: 'higher', digits: 0, informational: true },
    { key: 'decoratedP50', label: '@WithLock p50 (ms)', better: 'lower', digits: 2, informational: true },
    { key: 'byHandP50', label: 'by hand p50 (ms)', better: 'lower', digits: 2, informational: true },
    { key: 'overhead', label: 'decorator overhead', better: 'lower', digits: 3, informational: true },
    { key: 'errors', label: 'non-200 answers', better: 'lower', digits: 0, informational: true },
  ],
  params: {
    full: { concurrency: 16, blocks: 8, blockMs: 2_000, warmupMs: 1_500 },
    smoke: { concurrency: 4, blocks: 2, blockMs: 300, warmupMs: 200 },
  },

  async run({ urls, params }) {
    // Loaded here, not at the top: the other scenarios must not depend on the Nest layer.
    const { startApp } = await import('./nest-app.js');
    const clients = await connect(urls, false);
    const { app, port } = await startApp(clients);
    try {
      const job: LoadJob = { port, routes: ['decorated', 'by-hand'], ...params };
      const load = fork(LOAD, [JSON.stringify(job)]);
      const report = await nextMessage<LoadReport>(load, 'HTTP client');
      const route = (name: string) => {
        const { latencies, ms, statuses } = report[name]!;
        const errors = Object.entries(statuses).filter(([status]) => status !== '200');
        if (errors.length) console.warn(`decorator / ${name}: non-200 answers ${JSON.stringify(Object.fromEntries(errors))}`);
        const failed = errors.reduce((sum, [, count]) => sum + count, 0);
        return { rps: (latencies.length * 1000) / ms, p50: percentile(ascending(latencies), 50), errors: failed };
      };
      const decorated = route('decorated');
      const byHand = route('by-hand');
      return {
        decoratedRps: decorated.rps,
        byHandRps: byHand.rps,
        decoratedP50: decorated.p50,
        byHandP50: byHand.p50,
        overhead: byHand.rps / decorated.rps - 1,
        errors: decorated.errors + byHand.errors,
      };
    } finally {
      await app.close();
      disconnect(clients);
    }
  },
};
