import { describe, expect, it } from 'vitest';
import { checkHistory } from './support/checker.js';
import { deadlineAtCall, type HistoryEvent } from './support/history.js';

// The checker on hand-written histories: a checker that cannot fail proves nothing, so every
// violation it knows is shown to be found, and a clean history to pass. Times are in ms here.

const T = (milliseconds: number) => BigInt(Math.round(milliseconds * 1e6));

interface HoldSpec {
  proc?: string;
  token: string;
  resource?: string;
  fence?: number;
  invoke?: number;
  ok: number;
  validFor: number;
  release?: number;
  ttl?: number;
  single?: boolean;
}

/** The worker's side of one hold: acquire invoke + ok (with validUntil), release invoke. */
function hold(spec: HoldSpec): HistoryEvent[] {
  const base = { proc: spec.proc ?? 'p', worker: 0, resource: spec.resource ?? 'r' };
  const id = `${spec.token}:acquire`;
  const events: HistoryEvent[] = [
    { ...base, op: 'acquire', phase: 'invoke', id, t: T(spec.invoke ?? spec.ok - 1), ttl: spec.ttl ?? 1000, single: spec.single },
    {
      ...base,
      op: 'acquire',
      phase: 'ok',
      id,
      t: T(spec.ok),
      token: spec.token,
      fence: spec.fence,
      validUntil: T(spec.ok + spec.validFor),
      ttl: spec.ttl ?? 1000,
      single: spec.single,
      driftFactor: 0.01,
    },
  ];
  if (spec.release !== undefined) events.push({ ...base, op: 'release', phase: 'invoke', t: T(spec.release), token: spec.token });
  return events;
}

/** An extend of `token`'s lock: invoke, then ok or fail with the validUntil the lock stated after it. */
function extend(token: string, at: number, done: number, ttl: number, phase: 'ok' | 'fail', validUntil: number): HistoryEvent[] {
  const base = { proc: 'p', worker: 0, resource: 'r', op: 'extend' as const, id: `${token}:extend:${at}`, token, ttl };
  return [
    { ...base, phase: 'invoke', t: T(at) },
    { ...base, phase, t: T(done), validUntil: T(validUntil), ...(phase === 'fail' ? { code: 'QUORUM_UNREACHABLE' } : {}) },
  ];
}

let seq = 0;
/** What the store applied: a read or a write, accepted or not. */
function store(op: 'read' | 'write', at: number, fields: { token: string; fence: number | undefined; accepted: boolean; value?: number; plain?: number; resource?: string }): HistoryEvent {
  return {
    proc: 'store',
    worker: 0,
    op: op === 'read' ? 'store-read' : 'store-write',
    phase: fields.accepted ? 'ok' : 'fail',
    t: T(at),
    seq: ++seq,
    resource: fields.resource ?? 'r',
    token: fields.token,
    fence: fields.fence,
    accepted: fields.accepted,
    ...(fields.value === undefined ? {} : { value: fields.value }),
    ...(fields.plain === undefined ? {} : { plain: fields.plain }),
  };
}

function final(at: number, value: number, plain: number, resource = 'r'): HistoryEvent {
  return { proc: 'store', worker: 0, op: 'final', phase: 'ok', t: T(at), resource, value, plain };
}

/** A correct run: three holders one after the other, each read-modify-writing both counters. */
function cleanHistory(): HistoryEvent[] {
  return [
    ...hold({ token: 'a', fence: 1, ok: 0, validFor: 100, release: 10 }),
    store('read', 2, { token: 'a', fence: 1, accepted: true }),
    store('write', 4, { token: 'a', fence: 1, accepted: true, value: 1, plain: 1 }),
    ...hold({ proc: 'q', token: 'b', fence: 2, ok: 12, validFor: 100, release: 30 }),
    store('read', 14, { token: 'b', fence: 2, accepted: true }),
    store('write', 16, { token: 'b', fence: 2, accepted: true, value: 2, plain: 2 }),
    // c's lock ran out before c released: the window ends at validUntil (40), not at 90.
    ...hold({ token: 'c', fence: 3, ok: 31, validFor: 9, release: 90 }),
    store('read', 33, { token: 'c', fence: 3, accepted: true }),
    store('write', 35, { token: 'c', fence: 3, accepted: true, value: 3, plain: 3 }),
    ...hold({ proc: 'q', token: 'd', fence: 4, ok: 41, validFor: 100, release: 50 }),
    final(100, 3, 3),
  ];
}

describe('the safety checker', () => {
  it('passes a clean history', () => {
    const result = checkHistory(cleanHistory());
    expect(result.violations).toEqual([]);
    expect(result.ok).toBe(true);
    expect(result.stats).toMatchObject({ holds: 4, writesAccepted: 3, writesRejected: 0, plainWrites: 3 });
  });

  it('passes a stale holder whose late write the store rejected', () => {
    const history = [
      ...hold({ token: 'a', fence: 1, ok: 0, validFor: 50, release: 200 }),
      store('read', 1, { token: 'a', fence: 1, accepted: true }),
      ...hold({ proc: 'q', token: 'b', fence: 2, ok: 60, validFor: 100, release: 70 }),
      store('read', 61, { token: 'b', fence: 2, accepted: true }),
      store('write', 62, { token: 'b', fence: 2, accepted: true, value: 1, plain: 1 }),
      store('write', 150, { token: 'a', fence: 1, accepted: false, value: 1 }), // a, paused, writes late
      final(300, 1, 1),
    ];
    const result = checkHistory(history);
    expect(result.violations).toEqual([]);
    expect(result.stats.writesRejected).toBe(1);
  });

  it('finds overlapping validity windows, also when they are not adjacent', () => {
    const history = [
      ...hold({ token: 'long', ok: 0, validFor: 1000, release: 500 }),
      ...hold({ proc: 'q', token: 'short', ok: 10, validFor: 5, release: 12 }),
      ...hold({ proc: 'q', token: 'second', ok: 100, validFor: 100, release: 150 }),
      ...hold({ token: 'other-resource', resource: 'elsewhere', ok: 100, validFor: 100 }),
    ];
    const result = checkHistory(history);
    expect(result.counts.overlap).toBe(2);
    expect(result.violations.map((v) => v.message).join('\n')).toMatch(/q\/0 .*token short.*while p\/0 .*token long/);
  });

  it('does not count a window that ended (release or validity) before the next began', () => {
    const touching = [...hold({ token: 'a', ok: 0, validFor: 10 }), ...hold({ proc: 'q', token: 'b', ok: 10, validFor: 10 })];
    expect(checkHistory(touching).counts.overlap).toBe(0);
    const released = [...hold({ token: 'a', ok: 0, validFor: 100, release: 5 }), ...hold({ proc: 'q', token: 'b', ok: 6, validFor: 10 })];
    expect(checkHistory(released).counts.overlap).toBe(0);
  });

  it('extends a window by a successful extension', () => {
    const history = [
      ...hold({ token: 'a', ok: 0, validFor: 10, release: 100 }),
      { proc: 'p', worker: 0, op: 'extend', phase: 'ok', t: T(5), resource: 'r', token: 'a', validUntil: T(50) } as HistoryEvent,
      ...hold({ proc: 'q', token: 'b', ok: 30, validFor: 10 }),
    ];
    expect(checkHistory(history).counts.overlap).toBe(1);
  });

  it('shortens a window by an extension with a shorter ttl, successful or not', () => {
    // a holds until 100; an extend with ttl 5 at 10 leaves it until 13 (ok) or lost at 12 (failed).
    for (const phase of ['ok', 'fail'] as const) {
      const history = [
        ...hold({ token: 'a', ok: 0, validFor: 100, release: 80 }),
        ...extend('a', 10, 12, 5, phase, phase === 'ok' ? 13 : 12),
        ...hold({ proc: 'q', token: 'b', ok: 20, validFor: 100, release: 30 }),
      ];
      const result = checkHistory(history);
      expect(result.violations).toEqual([]);
      expect(result.holds.find((h) => h.token === 'a')!.end).toBe(T(phase === 'ok' ? 13 : 12));
    }
  });

  it("states a lock's last deadline, not the time of the call, for an extend called after it expired", () => {
    // a's lock ran out at 100; a stalled process called extend at 1,700. The worker must claim 100:
    // claiming 1,700 made b (at 1,500) look like an overlap in a run on a starved machine.
    const lastClaim = T(100);
    expect(deadlineAtCall(T(1_700), 0, lastClaim)).toBe(lastClaim);
    expect(deadlineAtCall(T(50), 30, lastClaim)).toBe(T(80));
    const history = [
      ...hold({ token: 'a', ok: 0, validFor: 100, release: 1_800 }),
      ...extend('a', 1_700, 1_701, 1_000, 'fail', Number(deadlineAtCall(T(1_700), 0, lastClaim)) / 1e6),
      ...hold({ proc: 'q', token: 'b', ok: 1_500, validFor: 100 }),
    ];
    expect(checkHistory(history).violations).toEqual([]);
    // Claiming the time of the call instead is an overlap of 200 ms.
    const asCalled = [...hold({ token: 'a', ok: 0, validFor: 100, release: 1_800 }), ...extend('a', 1_700, 1_701, 1_000, 'fail', 1_700), ...hold({ proc: 'q', token: 'b', ok: 1_500, validFor: 100 })];
    expect(checkHistory(asCalled).counts.overlap).toBe(1);
  });

  it('finds a holder that relies on its old deadline after a failed extend with a shorter ttl', () => {
    // The extend (ttl 2) failed, yet the lock still claims validity until 100 and its holder
    // writes at 30: b took the lock once the masters dropped a's key at about 12.
    const history = [
      ...hold({ token: 'a', fence: 1, ok: 0, validFor: 100, release: 40 }),
      store('read', 5, { token: 'a', fence: 1, accepted: true }),
      ...extend('a', 10, 11, 2, 'fail', 100),
      ...hold({ proc: 'q', token: 'b', fence: 2, ok: 20, validFor: 100, release: 50 }),
      store('read', 21, { token: 'b', fence: 2, accepted: true }),
      store('write', 30, { token: 'a', fence: 1, accepted: false, value: 1, plain: 1 }),
      store('write', 35, { token: 'b', fence: 2, accepted: true, value: 1, plain: 1 }),
      final(100, 1, 1),
    ];
    const result = checkHistory(history);
    expect(result.counts.overlap).toBe(1);
    expect(result.counts['validity-excess']).toBe(1);
    expect(result.counts['lost-update']).toBe(1);
    expect(result.violations.map((v) => v.message).join('\n')).toMatch(/after a failed extend with ttl 2 ms the lock still claimed 89\.0 ms/);
  });

  it('accepts an extension that claims no more than its ttl less drift from its return', () => {
    // ttl 100, drift 3: returning at 12, it may claim until 12 + 97 = 109, not 110.
    const within = [...hold({ token: 'a', ok: 0, validFor: 50 }), ...extend('a', 10, 12, 100, 'ok', 109)];
    expect(checkHistory(within).ok).toBe(true);
    const beyond = [...hold({ token: 'a', ok: 0, validFor: 50 }), ...extend('a', 10, 12, 100, 'ok', 110)];
    expect(checkHistory(beyond).counts['validity-excess']).toBe(1);
    // A single-round acquire is held to its own bound, not to the extension's after it.
    const longer = [...hold({ token: 'b', invoke: 0, ok: 1, validFor: 900, single: true }), ...extend('b', 10, 12, 2500, 'ok', 2400)];
    expect(checkHistory(longer, { validitySlackMs: 5 }).ok).toBe(true);
    // A ttl below the drift leaves nothing: a lost lock whose deadline is already behind claims nothing.
    const lost = [...hold({ token: 'c', ok: 0, validFor: 50 }), ...extend('c', 10, 12, 1, 'fail', 11)];
    expect(checkHistory(lost).ok).toBe(true);
  });

  it('finds a lost update on the counter only the lock protects', () => {
    const history = [
      ...hold({ token: 'a', fence: 1, ok: 0, validFor: 100, release: 10 }),
      store('write', 4, { token: 'a', fence: 1, accepted: true, value: 1, plain: 1 }),
      ...hold({ proc: 'q', token: 'b', fence: 2, ok: 12, validFor: 100, release: 30 }),
      // b read plain before a's write landed, and overwrote it with the same value
      store('write', 16, { token: 'b', fence: 2, accepted: true, value: 2, plain: 1 }),
      final(100, 2, 1),
    ];
    const result = checkHistory(history);
    expect(result.counts['lost-update']).toBe(1);
    expect(result.counts['lost-update-fenced']).toBe(0);
  });

  it("judges an unfenced lock's operations by the unfenced counter alone", () => {
    const mixed = (bPlain: number) => [
      ...hold({ token: 'a', fence: 5, ok: 0, validFor: 100, release: 10 }),
      store('read', 2, { token: 'a', fence: 5, accepted: true }),
      store('write', 4, { token: 'a', fence: 5, accepted: true, value: 1, plain: 1 }),
      // b holds no fence: the store leaves the fenced counter (1) and its mark (5) alone.
      ...hold({ proc: 'q', token: 'b', ok: 12, validFor: 100, release: 30 }),
      store('read', 14, { token: 'b', fence: undefined, accepted: true }),
      store('write', 16, { token: 'b', fence: undefined, accepted: true, value: 1, plain: bPlain }),
      ...hold({ token: 'c', fence: 6, ok: 32, validFor: 100, release: 40 }),
      store('write', 34, { token: 'c', fence: 6, accepted: true, value: 2, plain: bPlain + 1 }),
      final(100, 2, bPlain + 1),
    ];
    expect(checkHistory(mixed(2)).ok).toBe(true);
    expect(checkHistory(mixed(2)).stats).toMatchObject({ writesAccepted: 2, writesRejected: 0, plainWrites: 3 });
    // b overwrote a's plain write with the same value: a lost update, found without a fence.
    expect(checkHistory(mixed(1)).counts['lost-update']).toBe(1);
  });

  it('finds a lost update from the final value alone', () => {
    const history = [
      store('write', 4, { token: 'a', fence: 1, accepted: true, value: 1, plain: 1 }),
      store('write', 6, { token: 'b', fence: 2, accepted: true, value: 2, plain: 2 }),
      final(100, 2, 1), // the store says 1, yet two writes were acknowledged
    ];
    expect(checkHistory(history).counts['lost-update']).toBe(1);
  });

  it('finds a lost update on the fenced counter', () => {
    const history = [
      store('write', 4, { token: 'a', fence: 1, accepted: true, value: 1 }),
      store('write', 6, { token: 'b', fence: 2, accepted: true, value: 1 }),
      final(100, 1, 0),
    ];
    expect(checkHistory(history).counts['lost-update-fenced']).toBe(1);
  });

  it('finds fencing tokens that do not increase from one holder to the next', () => {
    const history = [
      ...hold({ token: 'a', fence: 7, ok: 0, validFor: 10 }),
      ...hold({ proc: 'q', token: 'b', fence: 7, ok: 20, validFor: 10 }),
      ...hold({ token: 'c', fence: 3, ok: 40, validFor: 10 }),
      ...hold({ token: 'd', fence: 9, ok: 60, validFor: 10 }),
    ];
    const result = checkHistory(history);
    expect(result.counts['fence-order']).toBe(2);
    expect(result.counts.overlap).toBe(0);
  });

  it('finds a stale write the store accepted', () => {
    const history = [
      store('read', 1, { token: 'b', fence: 5, accepted: true }),
      store('write', 2, { token: 'a', fence: 4, accepted: true, value: 1 }), // below the 5 already seen
      store('write', 3, { token: 'c', fence: 5, accepted: true, value: 2 }), // equal, but another holder
      store('write', 4, { token: 'b', fence: 5, accepted: false, value: 1 }),
      final(10, 2, 0),
    ];
    expect(checkHistory(history).counts['stale-accepted']).toBe(2);
  });

  it('finds a lock handed out with no validity left', () => {
    const history = hold({ token: 'a', ok: 100, validFor: -5 });
    expect(checkHistory(history).counts['no-validity']).toBe(1);
    // Handed out by the engine at 60 with validity until 95: the worker, descheduled, took it up at 100.
    const late = history.map((event) => (event.phase === 'ok' ? { ...event, engineStartedAt: T(50), engineMs: 10 } : event));
    expect(checkHistory(late).counts['no-validity']).toBe(0);
    const expired = history.map((event) => (event.phase === 'ok' ? { ...event, engineStartedAt: T(90), engineMs: 10 } : event));
    expect(checkHistory(expired).counts['no-validity']).toBe(1);
  });

  it('finds a single-round lock whose validity ignores the time the round took', () => {
    // ttl 1000, drift 12: invoked at 0, granted at 400, so valid until 1000 - 12 - 400 = 588 at most.
    const honest = hold({ token: 'a', invoke: 0, ok: 400, validFor: 180, single: true });
    expect(checkHistory(honest, { validitySlackMs: 5 }).ok).toBe(true);
    const greedy = hold({ token: 'b', invoke: 0, ok: 400, validFor: 1000 - 12 - 400, single: true });
    expect(checkHistory(greedy, { validitySlackMs: 5 }).counts['validity-excess']).toBe(1);
    // An acquire that waited through several rounds is not held to one round's bound.
    const waited = hold({ token: 'c', invoke: 0, ok: 400, validFor: 900 });
    expect(checkHistory(waited, { validitySlackMs: 5 }).ok).toBe(true);
  });

  it("judges a single round by the engine's timing of it where the worker has it, not by a descheduled worker's events", () => {
    // The worker invoked at 0 and recorded its grant at 700; the engine began the call at 150 and
    // had its grant at 200 (a 50 ms round). Valid until 150 + 1000 - 12 - 50 = 1088 at most.
    const timed = (token: string, validUntil: number) =>
      hold({ token, invoke: 0, ok: 700, validFor: validUntil - 700, single: true }).map((event) =>
        event.phase === 'ok' ? { ...event, engineStartedAt: T(150), engineMs: 50 } : event,
      );
    // By the worker's events alone this honest promise looks 700 ms too long.
    const honest = timed('a', 1088);
    expect(checkHistory(honest.map(({ engineStartedAt: _, engineMs: __, ...event }) => event), { validitySlackMs: 5 }).counts['validity-excess']).toBe(1);
    expect(checkHistory(honest, { validitySlackMs: 5 }).ok).toBe(true);
    // Still caught: a promise that ignored the round's 50 ms.
    const greedy = checkHistory(timed('b', 1138), { validitySlackMs: 5 });
    expect(greedy.counts['validity-excess']).toBe(1);
    expect(greedy.violations[0]!.message).toMatch(/taken in 50\.0 ms promised validity until 988\.0 ms after the round began in the engine/);
  });

  it('counts a single round from its own start where the engine timed it, not from the call\'s', () => {
    // The engine began the call at 150 and had its grant at 400, but its one round took only the
    // last 50 ms (the process was descheduled for 200 ms before sending it). The round began at
    // 350: valid until 350 + 1000 - 12 - 50 = 1288 at most.
    const timed = (token: string, validUntil: number, roundMs?: number) =>
      hold({ token, invoke: 0, ok: 700, validFor: validUntil - 700, single: true }).map((event) =>
        event.phase === 'ok' ? { ...event, engineStartedAt: T(150), engineMs: 250, ...(roundMs === undefined ? {} : { engineRoundMs: roundMs }) } : event,
      );
    // Counted from the call's start, this honest promise looks 400 ms too long (twice the gap).
    expect(checkHistory(timed('a', 1288), { validitySlackMs: 5 }).counts['validity-excess']).toBe(1);
    expect(checkHistory(timed('a', 1288, 50), { validitySlackMs: 5 }).ok).toBe(true);
    // Still caught: a promise that ignored the round's 50 ms, or counted from the round's end.
    const greedy = checkHistory(timed('b', 1338, 50), { validitySlackMs: 5 });
    expect(greedy.counts['validity-excess']).toBe(1);
    expect(greedy.violations[0]!.message).toMatch(/taken in 50\.0 ms promised validity until 988\.0 ms after the round began in the engine/);
    expect(checkHistory(timed('c', 400 + 988, 50), { validitySlackMs: 5 }).counts['validity-excess']).toBe(1);
  });

  it('judges a call that took no round of its own, having joined a hold of its process, by what the hold had claimed', () => {
    // Worker 0's round won a hold valid until 2,500; worker 1 of the same process joined it (one
    // token, no round: the engine timed its call from 100, 400 ms of it spent waiting for that round).
    const founder = hold({ token: 'shared', invoke: 0, ok: 500, validFor: 2000, ttl: 3000, single: true }).map((event) =>
      event.phase === 'ok' ? { ...event, engineStartedAt: T(10), engineMs: 480, engineRoundMs: 480 } : event,
    );
    const joiner = (validUntil: number, proc = 'p') =>
      hold({ proc, token: 'shared', invoke: 90, ok: 510, validFor: validUntil - 510, single: true, release: 900 }).map((event) => ({
        ...event,
        worker: 1,
        ...(event.phase === 'ok' ? { engineStartedAt: T(100), engineMs: 400 } : {}),
      }));
    // Its own ttl from the join, within the hold's claim: not a single round's promise, and no excess.
    expect(checkHistory([...founder, ...joiner(1500)], { validitySlackMs: 5 }).counts['validity-excess']).toBe(0);
    expect(checkHistory([...founder, ...joiner(2500)], { validitySlackMs: 5 }).counts['validity-excess']).toBe(0);
    // Past what the hold had claimed: caught.
    const beyond = checkHistory([...founder, ...joiner(2600)], { validitySlackMs: 5 });
    expect(beyond.counts['validity-excess']).toBe(1);
    expect(beyond.violations[0]!.message).toMatch(/joined a hold of its process and promised validity 100\.0 ms past/);
    // With no hold of its process to have joined (another process's token), its whole call is its
    // round: 100 + 1000 - 12 - 400 = 688 at most.
    const alone = checkHistory([...founder, ...joiner(1500, 'q')], { validitySlackMs: 5 });
    const excess = alone.violations.filter((v) => v.kind === 'validity-excess').map((v) => v.message);
    expect(excess).toEqual([expect.stringMatching(/q\/1 .*taken in 400\.0 ms promised validity until 1400\.0 ms/)]);
  });
});

