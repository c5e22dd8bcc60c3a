import { describe, expect, it } from 'vitest';
import { mostAtOnce, overlappingHolds, writerOverlaps, type ModalHold } from '../../bench/support/holds.js';

// The safety figures of bench/RESULTS.md (a mutex's overlaps, a semaphore's most holders at once,
// a read-write lock's writer overlaps) are counted by bench/support/holds.ts. A miss there would
// report a broken lock as safe, so each is checked against a brute-force count over every pair
// or instant, on hand-picked cases and on random hold sets (no Redis).

/** Whether two holds share an instant: one that ends where the other begins does not. */
const intersect = (a: readonly [number, number], b: readonly [number, number]) => a[0] < b[1] && b[0] < a[1];

function bruteMostAtOnce(intervals: readonly (readonly [number, number])[], weights?: readonly number[]): number {
  // The most is reached at some interval's start.
  let most = 0;
  for (const [at] of intervals) {
    let sum = 0;
    intervals.forEach(([from, to], i) => {
      if (from <= at && at < to) sum += weights?.[i] ?? 1;
    });
    most = Math.max(most, sum);
  }
  return most;
}

function bruteWriterClash(holds: readonly ModalHold[]): boolean {
  return holds.some((a, i) => holds.some((b, j) => i !== j && (a.mode === 'w' || b.mode === 'w') && intersect([a.from, a.to], [b.from, b.to])));
}

function bruteMutexClash(holds: readonly (readonly [number, number])[]): boolean {
  return holds.some((a, i) => holds.some((b, j) => i !== j && intersect(a, b)));
}

/** A deterministic generator, so that a failure can be replayed. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

function randomHolds(next: () => number, count: number): ModalHold[] {
  return Array.from({ length: count }, () => {
    const from = Math.floor(next() * 100);
    return { from, to: from + 1 + Math.floor(next() * 12), mode: next() < 0.8 ? 'r' : 'w' };
  });
}

describe('bench hold checks', () => {
  it('count a mutex hold that begins inside another, and none for holds end to start', () => {
    expect(overlappingHolds([[0, 10], [10, 20], [20, 30]])).toBe(0);
    expect(overlappingHolds([[20, 30], [0, 10], [9, 20]])).toBe(1);
    // Inside a long hold that an earlier short one does not reach past.
    expect(overlappingHolds([[0, 100], [1, 2], [50, 60]])).toBe(2);
  });

  it('take the most holders at once at an instant, weighted, with holds end to start apart', () => {
    expect(mostAtOnce([[0, 10], [10, 20], [20, 30]])).toBe(1);
    expect(mostAtOnce([[0, 10], [5, 15], [9, 12], [14, 20]])).toBe(3);
    expect(mostAtOnce([[0, 10], [5, 15], [9, 12]], [1, 3, 2])).toBe(6);
  });

  it('find a writer inside a reader, a reader inside a writer, and a writer inside a reader that another reader outlasts', () => {
    const r = (from: number, to: number): ModalHold => ({ from, to, mode: 'r' });
    const w = (from: number, to: number): ModalHold => ({ from, to, mode: 'w' });
    expect(writerOverlaps([r(0, 10), r(5, 15), w(15, 20), r(20, 30)])).toBe(0);
    expect(writerOverlaps([r(0, 10), w(5, 8)])).toBeGreaterThan(0);
    expect(writerOverlaps([w(0, 10), r(5, 20)])).toBeGreaterThan(0);
    // The furthest-reaching hold before the writer is a reader that began first.
    expect(writerOverlaps([r(0, 100), r(1, 3), w(50, 60)])).toBeGreaterThan(0);
    // A writer that only a later-beginning reader enters.
    expect(writerOverlaps([r(0, 5), w(5, 10), r(9, 12)])).toBeGreaterThan(0);
  });

  it('agree with a count over every pair and instant on random hold sets', () => {
    const next = random(20_261_128);
    let clashes = 0;
    for (let trial = 0; trial < 2_000; trial++) {
      const holds = randomHolds(next, 1 + Math.floor(next() * 8));
      const clash = bruteWriterClash(holds);
      if (clash) clashes++;
      expect(writerOverlaps(holds) > 0, JSON.stringify(holds)).toBe(clash);
      const intervals = holds.map((hold) => [hold.from, hold.to] as const);
      expect(overlappingHolds(intervals) > 0, JSON.stringify(intervals)).toBe(bruteMutexClash(intervals));
      const weights = holds.map(() => 1 + Math.floor(next() * 3));
      expect(mostAtOnce(intervals, weights), JSON.stringify({ intervals, weights })).toBe(bruteMostAtOnce(intervals, weights));
    }
    // Both kinds of set came up: the generator does not make a check pass by never clashing.
    expect(clashes).toBeGreaterThan(100);
    expect(clashes).toBeLessThan(1_900);
  });
});
