import { describe, expect, it } from 'vitest';
import { checkHistory } from './support/checker.js';
import type { HistoryEvent } from './support/history.js';

// The checker's invariants for readers and semaphores, on hand-written histories: each
// violation is shown to be found, and the clean histories next to them to pass. Times in ms.

const T = (milliseconds: number) => BigInt(Math.round(milliseconds * 1e6));

interface HoldSpec {
  token: string;
  ok: number;
  end: number;
  invoke?: number;
  mode?: 'read' | 'write';
  limit?: number;
  permits?: number;
  fence?: number;
  resource?: string;
  /** Readers of one process sharing a hold: the same token, their own workers. */
  proc?: string;
  worker?: number;
}

/** One hold: acquire invoke + ok (valid until `end`), released at `end`. */
function hold(spec: HoldSpec): HistoryEvent[] {
  const base = { proc: spec.proc ?? `p-${spec.token}`, worker: spec.worker ?? 0, resource: spec.resource ?? 'r' };
  const id = `${base.proc}:${base.worker}:${spec.token}:acquire`;
  return [
    { ...base, op: 'acquire', phase: 'invoke', id, t: T(spec.invoke ?? spec.ok - 1), ttl: 1000 },
    {
      ...base,
      op: 'acquire',
      phase: 'ok',
      id,
      t: T(spec.ok),
      token: spec.token,
      validUntil: T(spec.end + 100),
      ttl: 1000,
      driftFactor: 0.01,
      ...(spec.fence === undefined ? {} : { fence: spec.fence }),
      ...(spec.mode === 'read' ? { mode: 'read' as const } : {}),
      ...(spec.limit === undefined ? {} : { limit: spec.limit }),
      ...(spec.permits === undefined ? {} : { permits: spec.permits }),
    },
    { ...base, op: 'release', phase: 'invoke', t: T(spec.end), token: spec.token },
  ];
}

const check = (...holds: HoldSpec[]) => checkHistory(holds.flatMap(hold));

describe('checker: readers and writers', () => {
  it('passes overlapping readers, and writers before and after them', () => {
    const result = check(
      { token: 'w1', ok: 0, end: 10 },
      { token: 'r1', ok: 10, end: 30, mode: 'read' },
      { token: 'r2', ok: 15, end: 25, mode: 'read' },
      { token: 'w2', ok: 30, end: 40 },
    );
    expect(result.violations).toEqual([]);
  });

  it('judges readers of one process that share a token each by its own window', () => {
    // The second reader joined the first's hold and holds on after the first let go.
    const founder = { token: 't', proc: 'p', worker: 0, ok: 10, end: 20, mode: 'read' as const };
    const joiner = { token: 't', proc: 'p', worker: 1, ok: 15, end: 40, mode: 'read' as const };
    expect(check(founder, joiner, { token: 'w', ok: 45, end: 50 }).violations).toEqual([]);
    const beside = check(founder, joiner, { token: 'w', ok: 25, end: 35 });
    expect(beside.violations.map((v) => v.kind)).toContain('writer-shared');
    expect(beside.holds.filter((h) => h.token === 't')).toHaveLength(2);
  });

  it('flags a writer beside a reader, either way round', () => {
    expect(check({ token: 'r1', ok: 0, end: 20, mode: 'read' }, { token: 'w', ok: 10, end: 30 }).counts['writer-shared']).toBe(1);
    expect(check({ token: 'w', ok: 0, end: 20 }, { token: 'r1', ok: 10, end: 30, mode: 'read' }).counts['writer-shared']).toBe(1);
  });

  it('flags two writers on a resource that has readers too', () => {
    const result = check({ token: 'r', ok: 0, end: 5, mode: 'read' }, { token: 'w1', ok: 10, end: 20 }, { token: 'w2', ok: 15, end: 25 });
    expect(result.counts['writer-shared']).toBe(1);
  });
});

describe('checker: semaphores', () => {
  it('passes limit holders at once, and a next one after one left', () => {
    const result = check(
      { token: 'a', ok: 0, end: 20, limit: 2 },
      { token: 'b', ok: 5, end: 30, limit: 2 },
      { token: 'c', ok: 20, end: 40, limit: 2 },
    );
    expect(result.violations).toEqual([]);
  });

  it('flags one holder more than the limit', () => {
    const result = check(
      { token: 'a', ok: 0, end: 20, limit: 2 },
      { token: 'b', ok: 5, end: 30, limit: 2 },
      { token: 'c', ok: 10, end: 40, limit: 2 },
    );
    expect(result.counts['over-limit']).toBe(1);
    expect(result.violations[0]!.message).toContain('3 holders at once, limit 2');
  });

  it('counts a weighted permit by its weight: two holders may be over the limit, and four within it', () => {
    const within = check(
      { token: 'a', ok: 0, end: 20, limit: 4, permits: 2 },
      { token: 'b', ok: 5, end: 30, limit: 4, permits: 2 },
      { token: 'c', ok: 20, end: 40, limit: 4, permits: 1 },
      { token: 'd', ok: 21, end: 40, limit: 4 },
    );
    expect(within.violations).toEqual([]);
    const over = check({ token: 'a', ok: 0, end: 20, limit: 4, permits: 3 }, { token: 'b', ok: 5, end: 30, limit: 4, permits: 2 });
    expect(over.counts['over-limit']).toBe(1);
    expect(over.violations[0]!.message).toContain('5 permits held by 2 holders at once, limit 4');
  });
});

describe('checker: fences of shared holders', () => {
  it('allows concurrent readers one fence, and requires more of a holder that began after another was handed its lock', () => {
    const clean = check(
      { token: 'r1', invoke: 0, ok: 2, end: 20, mode: 'read', fence: 5 },
      { token: 'r2', invoke: 1, ok: 3, end: 20, mode: 'read', fence: 5 },
      { token: 'w', invoke: 4, ok: 20, end: 30, fence: 6 },
    );
    expect(clean.violations).toEqual([]);
    const stale = check(
      { token: 'r1', invoke: 0, ok: 2, end: 20, mode: 'read', fence: 5 },
      { token: 'r2', invoke: 3, ok: 4, end: 20, mode: 'read', fence: 5 },
    );
    expect(stale.counts['fence-order']).toBe(1);
  });
});
