import type { HistoryEvent } from './history.js';
import type { WorkerConfig } from './protocol.js';

/** Small pieces the scenarios share. */

export function shuffled<T>(items: readonly T[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

export const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

/** A looping worker process with the usual settings; `overrides` win. */
export function loopWorker(proc: string, urls: string[], overrides: Partial<WorkerConfig> = {}): WorkerConfig {
  return {
    proc,
    urls,
    workers: 2,
    resources: ['r'],
    mode: 'loop',
    ttlMs: [1_000],
    engine: {},
    holdMs: 3,
    pauseMs: 15,
    waitTimeoutMs: 5_000,
    ...overrides,
  };
}

/** Acquire attempts: the invoke event of each, paired with how it ended (if it did). */
export interface Attempt {
  readonly invoke: HistoryEvent;
  readonly end: HistoryEvent | undefined;
}

export function attempts(events: readonly HistoryEvent[], op: 'acquire' | 'probe' | 'probe-release' = 'acquire'): Attempt[] {
  const ends = new Map<string, HistoryEvent>();
  for (const event of events) if (event.op === op && event.phase !== 'invoke' && event.id) ends.set(event.id, event);
  return events.filter((e) => e.op === op && e.phase === 'invoke').map((invoke) => ({ invoke, end: ends.get(invoke.id!) }));
}

export const durationMs = (attempt: Attempt): number | undefined =>
  attempt.end ? Number(attempt.end.t - attempt.invoke.t) / 1e6 : undefined;

/** "3 of 4 (75%)"-style counts for expectation details. */
export function tally(values: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return [...counts].map(([value, n]) => `${value} x${n}`).join(', ') || 'none';
}
