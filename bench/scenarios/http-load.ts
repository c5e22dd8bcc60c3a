import { Agent, request } from 'node:http';
import { reportAndExit } from '../support/ipc.js';

/**
 * The HTTP client of scenario 4, in its own process so the client's CPU is not charged to the
 * server's event loop (which would dilute the decorator's cost). Alternates the two routes in
 * blocks, ABBA, so drift within the run hits both alike; a new lock key per request.
 */
export interface LoadJob {
  port: number;
  routes: readonly string[];
  concurrency: number;
  blocks: number;
  blockMs: number;
  warmupMs: number;
}

/** Per route: every request's latency (ms), the time spent in its measured blocks, answers by status. */
export type LoadReport = Record<string, { latencies: number[]; ms: number; statuses: Record<number, number> }>;

const job = JSON.parse(process.argv[2]!) as LoadJob;
const agent = new Agent({ keepAlive: true, maxSockets: job.concurrency });
const report: LoadReport = Object.fromEntries(job.routes.map((r) => [r, { latencies: [], ms: 0, statuses: {} }]));
let next = 0;

async function block(route: string, durationMs: number, record: boolean): Promise<void> {
  const until = performance.now() + durationMs;
  const entry = report[route]!;
  const caller = async () => {
    while (performance.now() < until) {
      const start = performance.now();
      const status = await get(`/${route}/${process.pid}-${next++}`);
      if (!record) continue;
      entry.latencies.push(performance.now() - start);
      entry.statuses[status] = (entry.statuses[status] ?? 0) + 1;
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: job.concurrency }, caller));
  if (record) entry.ms += performance.now() - start;
}

function get(path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: job.port, path, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

for (const route of job.routes) await block(route, job.warmupMs, false);
for (let i = 0; i < job.blocks; i++) {
  for (const route of i % 2 ? [...job.routes].reverse() : job.routes) await block(route, job.blockMs, true);
}
agent.destroy();
reportAndExit(report);
