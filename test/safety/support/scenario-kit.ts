import { checkHistory, type Hold } from './checker.js';
import type { HistoryEvent } from './history.js';
import type { WorkerConfig } from './protocol.js';
import type { SafetyRun } from './safety-run.js';

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
    detachedReentry: 0.2,
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

/**
 * The lock kinds a fault scenario runs for: the lock itself, a semaphore's permits (limit 2) and
 * a read-write lock (70% readers). Ids and titles of the shared kinds carry their name.
 */
export const KINDS = [
  { name: 'lock', id: '', title: '', shared: undefined },
  { name: 'semaphore', id: '-semaphore', title: 'Semaphore (limit 2): ', shared: { limit: 2 } },
  { name: 'read-write', id: '-read-write', title: 'Read-write lock (70% readers): ', shared: { readShare: 0.7 } },
] as const satisfies readonly KindShape[];

/**
 * Weighted permits: a semaphore of limit 4 whose holds take 1, 2 or 3 permits each, for the
 * scenarios that fault masters by slowing, pausing, killing and restarting them.
 */
export const WEIGHTED = {
  name: 'weighted',
  id: '-weighted',
  title: 'Weighted permits (limit 4, 1 to 3 each): ',
  shared: { limit: 4, permits: [1, 2, 3] },
} as const satisfies KindShape;

interface KindShape {
  readonly name: string;
  readonly id: string;
  readonly title: string;
  readonly shared: WorkerConfig['shared'];
}
export type Kind = (typeof KINDS)[number] | typeof WEIGHTED;

/** The holds that may share the resource under `kind` (permits, readers), and how many of them held it at once at most. */
export function sharedAtOnce(kind: Kind, holds: readonly Hold[]): { what: string; most: number } {
  const permits = kind.name === 'semaphore' || kind.name === 'weighted';
  const shared = holds.filter((h) => (permits ? h.limit > 1 : h.mode === 'read'));
  // Per resource: holds of different resources at once say nothing about sharing one.
  const byResource = new Map<string, Hold[]>();
  for (const hold of shared) byResource.set(hold.resource, [...(byResource.get(hold.resource) ?? []), hold]);
  const most = Math.max(0, ...[...byResource.values()].map(mostAtOnce));
  return { what: permits ? 'permits' : 'readers', most };
}

/** For a shared kind, expects that its permits or readers really held together: the run tested sharing, not only exclusion. */
export function expectSharing(scenario: SafetyRun, kind: Kind, resources?: readonly string[]): void {
  if (!kind.shared) return;
  const holds = checkHistory(scenario.history.events()).holds.filter((h) => !resources || resources.includes(h.resource));
  const { what, most } = sharedAtOnce(kind, holds);
  scenario.expect(`${what} did hold together (at most ${most} at once on one resource)`, most > 1);
}

/** How many holds came under a token another hold of the same process had first: readers that joined a hold. */
export function sharedHolds(holds: readonly Hold[]): number {
  const seen = new Set<string>();
  let joined = 0;
  for (const hold of [...holds].sort((a, b) => (a.okAt < b.okAt ? -1 : a.okAt > b.okAt ? 1 : 0))) {
    const key = `${hold.proc}\n${hold.token}`;
    if (seen.has(key)) joined++;
    else seen.add(key);
  }
  return joined;
}

/** The largest number of holds whose windows intersect. */
export function mostAtOnce(holds: readonly Hold[]): number {
  const edges = holds.flatMap((h) => [
    { t: h.okAt, change: 1 },
    { t: h.end, change: -1 },
  ]);
  edges.sort((a, b) => (a.t < b.t ? -1 : a.t > b.t ? 1 : a.change - b.change));
  let current = 0;
  let most = 0;
  for (const edge of edges) most = Math.max(most, (current += edge.change));
  return most;
}
