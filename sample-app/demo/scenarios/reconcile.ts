import { setTimeout as sleep } from 'node:timers/promises';
import { expectOk } from '../http.js';

/** What GET /reconcile/runs answers (see the sample app's reconcile-log.ts). */
export interface ReconcileHistory {
  runs: { replica: string; startUs: number; endUs: number; checked: number; outOfBalance: string[] }[];
  /** replica → how many of its turns were skipped */
  skips: Record<string, number>;
}

export interface ReconcileSummary {
  runs: number;
  perReplica: Record<string, number>;
  /** Pairs of runs whose [start, end] intervals, on the store's clock, overlap. */
  overlaps: number;
  /** Turns skipped: the lock held elsewhere, or too few masters to grant it. */
  skipped: number;
  /** Every account some run found out of balance. */
  flagged: string[];
}

export function history(url: string): Promise<ReconcileHistory> {
  return expectOk<ReconcileHistory>('GET', `${url}/reconcile/runs`);
}

/** Waits until the job has run `more` more times than `after` runs (or the timeout passes). */
export async function waitForRuns(url: string, after: number, more: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && (await history(url)).runs.length < after + more) await sleep(100);
}

export function summarize(history: ReconcileHistory): ReconcileSummary {
  const runs = [...history.runs].sort((a, b) => a.startUs - b.startUs);
  let overlaps = 0;
  for (let i = 0; i < runs.length; i++) {
    // Sorted by start: any later run that starts before this one ends overlaps it.
    for (let j = i + 1; j < runs.length && runs[j]!.startUs < runs[i]!.endUs; j++) overlaps++;
  }
  const perReplica: Record<string, number> = {};
  for (const run of runs) perReplica[run.replica] = (perReplica[run.replica] ?? 0) + 1;
  return {
    runs: runs.length,
    perReplica,
    overlaps,
    skipped: Object.values(history.skips).reduce((total, count) => total + count, 0),
    flagged: [...new Set(runs.flatMap((run) => run.outOfBalance))].sort(),
  };
}
