import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createAdapter, type LibraryId } from '../adapters/index.js';
import { reportAndExit } from '../support/ipc.js';

/**
 * One of the hot-key processes: `workers` loops on the same key, each holding the lock for
 * `holdMs` via `await setTimeout(holdMs)` (modelling I/O under the lock, not CPU). Times are
 * process.hrtime.bigint(): CLOCK_MONOTONIC, one clock for every process on this machine, so the
 * coordinator can lay all processes' hold intervals on one line.
 */
export interface WorkerJob {
  library: LibraryId;
  urls: string[];
  key: string;
  workers: number;
  holdMs: number;
  ttlMs: number;
  /** After endAt, how long acquires still waiting may finish before they are cut off. */
  graceMs: number;
  /** A semaphore's permits instead of the lock (bench/scenarios/shared-hot-key.ts). */
  limit?: number;
  /** With `limit`: each acquire takes one of these weights at random (weighted permits). */
  permits?: readonly number[];
  /** Readers and writers instead of the lock: the share of acquires that read. */
  readShare?: number;
  /** Each worker stops after this many acquires, failed ones included (endAt is then only a deadline); default: at endAt. */
  cycles?: number;
  /**
   * A store (a Redis of its own) the critical section reads and writes, as an app's does: GET
   * a counter before the hold's sleep and SET it one higher after it, two round trips inside
   * every hold. The counter's final value tells lost updates (bench/scenarios/hot-key-run.ts).
   */
  store?: { url: string; key: string };
}

/** Sent by the coordinator once every process is connected. hrtime values as decimal strings. */
export interface WorkerGo {
  startAt: string;
  endAt: string;
}

export interface WorkerReport {
  /**
   * ms from asking to holding, for every acquire asked for before endAt (also the ones that
   * failed); one still waiting at endAt + graceMs counts with its wait so far, a lower bound.
   */
  waits: number[];
  failures: number;
  /** How many waits were cut off that way. */
  censored: number;
  /** [acquired, release called] in ns since startAt. */
  holds: [number, number][];
  /** With `readShare`: per hold, 'r' or 'w'; per wait, the same (a wait that failed included). */
  holdModes?: ('r' | 'w')[];
  /** With `permits`: per hold, its weight. */
  holdPermits?: number[];
  waitModes?: ('r' | 'w')[];
  /** ns since startAt when every worker of this process was done (its last release answered). */
  finishedAt: number;
  /** This process's user+system CPU (`process.cpuUsage()`, every thread) from startAt to finishedAt, in ms. */
  cpuMs: number;
}

const job = JSON.parse(process.argv[2]!) as WorkerJob;
const adapter = createAdapter(job.library);
await adapter.setup(job.urls, { autoPipelining: false });
const store = job.store ? new Redis(job.store.url, { lazyConnect: true }) : undefined;
await store?.connect();
process.send!('ready');
const go = await new Promise<WorkerGo>((resolve) => process.once('message', (m) => resolve(m as WorkerGo)));
const startAt = BigInt(go.startAt);
const endAt = BigInt(go.endAt);
await sleep(Number(startAt - process.hrtime.bigint()) / 1e6);
const cpuAtStart = process.cpuUsage();

const report: WorkerReport = {
  waits: [],
  failures: 0,
  censored: 0,
  holds: [],
  finishedAt: Number.NaN,
  cpuMs: Number.NaN,
  ...(job.readShare === undefined ? {} : { holdModes: [], waitModes: [] }),
  ...(job.permits === undefined ? {} : { holdPermits: [] }),
};
/**
 * When each worker that is waiting right now asked, and as what: a wait cut off at the end keeps
 * its mode, so a writer starved behind readers counts in the write waits.
 */
const waiting = new Map<bigint, 'read' | 'write' | undefined>();
const ns = (t: bigint) => Number(t - startAt);

async function worker(): Promise<void> {
  for (let held = 0; process.hrtime.bigint() < endAt && held !== job.cycles; held++) {
    const asked = process.hrtime.bigint();
    let handle: unknown;
    const mode = job.readShare === undefined ? undefined : Math.random() < job.readShare ? 'read' : 'write';
    const permits = job.permits?.[Math.floor(Math.random() * job.permits.length)];
    waiting.set(asked, mode);
    try {
      handle = await take(mode, permits);
    } catch {
      report.failures++;
      report.waits.push(Number(process.hrtime.bigint() - asked) / 1e6);
      if (mode) report.waitModes!.push(mode === 'read' ? 'r' : 'w');
      continue;
    } finally {
      waiting.delete(asked);
    }
    const acquired = process.hrtime.bigint();
    await criticalSection();
    const releasing = process.hrtime.bigint();
    await adapter.release(handle);
    report.waits.push(Number(acquired - asked) / 1e6);
    report.holds.push([ns(acquired), ns(releasing)]);
    if (permits !== undefined) report.holdPermits!.push(permits);
    if (mode) {
      report.holdModes!.push(mode === 'read' ? 'r' : 'w');
      report.waitModes!.push(mode === 'read' ? 'r' : 'w');
    }
  }
}

async function criticalSection(): Promise<void> {
  if (!store) return void (await sleep(job.holdMs));
  const value = await store.get(job.store!.key);
  await sleep(job.holdMs);
  await store.set(job.store!.key, Number(value ?? 0) + 1);
}

function take(mode: 'read' | 'write' | undefined, permits: number | undefined): Promise<unknown> {
  if (job.limit !== undefined) return adapter.acquireShared!(job.key, job.ttlMs, permits === undefined ? { limit: job.limit } : { limit: job.limit, permits });
  if (mode) return adapter.acquireShared!(job.key, job.ttlMs, { mode });
  return adapter.acquire(job.key, job.ttlMs);
}

// Acquires still waiting at endAt may finish (their waits are real), but a library that leaves
// callers waiting for tens of seconds must not stretch the run by as much: cut off after the grace.
const cutoff = Number(endAt - process.hrtime.bigint()) / 1e6 + job.graceMs;
const finished = await Promise.race([Promise.all(Array.from({ length: job.workers }, worker)).then(() => true), sleep(cutoff, false)]);
const now = process.hrtime.bigint();
for (const [asked, mode] of waiting) {
  report.waits.push(Number(now - asked) / 1e6);
  if (mode) report.waitModes!.push(mode === 'read' ? 'r' : 'w');
}
report.censored = waiting.size;
report.finishedAt = ns(now);
const cpu = process.cpuUsage(cpuAtStart);
report.cpuMs = (cpu.user + cpu.system) / 1000;
store?.disconnect();
if (finished) await adapter.close();
reportAndExit(report); // exiting drops any acquire still in flight; its key expires with its ttl
