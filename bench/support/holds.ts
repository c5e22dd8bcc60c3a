// What the contended scenarios check hold intervals for (on the shared monotonic clock, in ns):
// the safety figures of bench/RESULTS.md ("overlaps", "most at once", "writer overlaps") come
// from these, so test/bench/holds.test.ts holds them to a brute-force count.

/** A hold of a read-write lock: a reader's ('r') or a writer's ('w'). */
export interface ModalHold {
  readonly from: number;
  readonly to: number;
  readonly mode: 'r' | 'w';
}

/**
 * Holds that begin before an earlier-beginning hold has ended: 0 exactly when no two intervals
 * of a mutex intersect. One that ends where the next begins does not intersect it.
 */
export function overlappingHolds(holds: readonly (readonly [from: number, to: number, ...rest: unknown[]])[]): number {
  const sorted = [...holds].sort((a, b) => a[0] - b[0]);
  let overlaps = 0;
  let lastEnd = -Infinity;
  for (const [from, to] of sorted) {
    if (from < lastEnd) overlaps++;
    lastEnd = Math.max(lastEnd, to);
  }
  return overlaps;
}

/** The largest number of intervals that intersect at one instant, or the largest sum of their weights. */
export function mostAtOnce(intervals: readonly (readonly [number, number])[], weights?: readonly number[]): number {
  const edges = intervals.flatMap(([from, to], i) => [
    [from, weights?.[i] ?? 1],
    [to, -(weights?.[i] ?? 1)],
  ]);
  // An interval that ends where another starts does not intersect it: ends first.
  edges.sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!);
  let now = 0;
  let most = 0;
  for (const [, change] of edges) most = Math.max(most, (now += change!));
  return most;
}

/**
 * How many holds, taken in order of their start, begin inside the furthest-reaching hold before
 * them with a writer's on either side: 0 exactly when no writer's interval intersects any other
 * hold, which is what the figure is for.
 */
export function writerOverlaps(holds: readonly ModalHold[]): number {
  const sorted = [...holds].sort((a, b) => a.from - b.from);
  let overlaps = 0;
  let reach: ModalHold | undefined;
  for (const hold of sorted) {
    if (reach && hold.from < reach.to && (hold.mode === 'w' || reach.mode === 'w')) overlaps++;
    if (!reach || hold.to > reach.to) reach = hold;
  }
  return overlaps;
}
