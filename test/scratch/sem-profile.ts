import { fork } from 'node:child_process';
import { Redis } from 'ioredis';
import { Redlock } from '../../lib/core/index.js';
import { RedisFleet } from '../support/redis-fleet.js';

const LIMIT = Number(process.env.LIMIT ?? 4);
const WORKERS = 5;
const PROCS = 4;
const MS = 6000;

async function child(urls: string[]): Promise<void> {
  const clients = urls.map((u) => new Redis(u));
  const stats = { holds: 0, handed: 0, rounds: 0, refusedRounds: 0, releasesHanded: 0, releasesReal: 0, waitingCalls: 0 };
  const redlock = new Redlock(clients, {
    restartQuarantineMs: false,
    instrumentation: {
      acquireStarted: () => { let n = 0; return {
        round: (g: number) => { n++; stats.rounds++; const k = 'g' + g + (n === 1 ? 'first' : 'later'); (stats as any)[k] = ((stats as any)[k] ?? 0) + 1; },
        waiting: () => { stats.waitingCalls++; },
      }; },
    },
  });
  const end = performance.now() + MS;
  await Promise.all(Array.from({ length: WORKERS }, async () => {
    while (performance.now() < end) {
      const lock = await redlock.acquire('hot-sem', 10_000, { limit: LIMIT, waitTimeoutMs: 30_000 });
      stats.holds++;
      await new Promise((r) => setTimeout(r, 2));
      const res = await lock.release();
      if (res.handedOver) stats.releasesHanded++; else stats.releasesReal++;
    }
  }));
  await redlock.releaseAll();
  process.send!({ ...stats, ...(globalThis as any).__s });
  for (const c of clients) c.disconnect();
}

async function main(): Promise<void> {
  if (process.argv[2] === 'child') return child(process.argv.slice(3));
  const fleet = await RedisFleet.start(5);
  try {
    const results = await Promise.all(Array.from({ length: PROCS }, () => new Promise<any>((resolve) => {
      const cp = fork(new URL(import.meta.url).pathname, ['child', ...fleet.urls()], { execArgv: ['--import', './test/support/ts-loader/register.mjs'] });
      cp.on('message', resolve);
    })));
    const total = results.reduce((a, r) => { for (const k in r) a[k] = (a[k] ?? 0) + r[k]; return a; }, {} as any);
    console.log(JSON.stringify(results));
    console.log('total', JSON.stringify(total), 'holds/s', (total.holds / (MS / 1000)).toFixed(0), 'rounds/hold', (total.rounds / total.holds).toFixed(2));
  } finally {
    await fleet.stopAll();
  }
}
void main().then(() => process.exit(0));
