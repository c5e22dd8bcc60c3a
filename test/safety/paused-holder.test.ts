import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { failures, runFor, spread, timeoutFor } from './support/safety-run.js';
import { scenarioFixture } from './support/scenario-fixture.js';
import { checkHistory } from './support/checker.js';
import { KINDS, loopWorker, mostAtOnce, tally } from './support/scenario-kit.js';

// The holder itself pauses: it blocks its event loop (as a long GC pause or CPU-bound work
// would) for four times its ttl while holding the lock. Redlock cannot stop that holder from
// acting late; what it must do is: let the lock expire so a second holder gets it (with a higher
// fencing token), fire the first holder's lost-lock signal as soon as its loop runs again, and
// give the store what it needs to reject the first holder's late write.
// A read-write lock's stalled holder is a writer, among readers and writers; a semaphore's holds
// a permit (limit 2) among permit holders, who share the resource and leave the store alone, so
// there the proof that the stalled permit was taken back is both other workers holding at once.

const TTL = 500;
/**
 * Four ttls: the lock expires after one; a waiter whose round split the votes with the holder
 * may then still see the holder's old queue entry on some masters, which lives up to a ttl plus
 * one second after it was written, and sleeps until then (the holder publishes no release).
 */
const STALL_MS = TTL * 4;
const SHORT_MS = 5_000;

const fixture = scenarioFixture();

for (const kind of KINDS) {
  const proves = kind.name === 'semaphore' ? 'takes its permit back' : 'lets a second holder in, and the late write is rejected';
  it(`${kind.title}fires the paused holder’s signal, ${proves}`, async () => {
    const masters = fixture.masters();
    const scenario = fixture.start({
      id: `paused-holder${kind.id}`,
      title: `${kind.title}The holder blocks its event loop for 4x its ttl`,
      expected: 'safe',
      method:
        `One process holds the lock (ttl ${TTL} ms, auto-extended) and busy-loops ${STALL_MS} ms, then writes anyway; ` +
        'another process (2 workers) loops on the same resource (bare counter fences)' +
        (kind.name === 'read-write' ? '; the holder is a writer.' : kind.name === 'semaphore' ? '; all hold permits.' : '.'),
    });
    // No master loses data here: fences are the bare counters (no time floor), so the fence checks test them.
    const engine = { restartQuarantineMs: false as const, fenceTimeFloor: false };
    const shared = { resources: ['stalled'], ttlMs: [TTL], engine };
    const stallerShape = kind.name === 'read-write' ? { readShare: 0 } : kind.shared;
    await Promise.all([
      scenario.spawn(loopWorker('staller', masters.urls(), { ...shared, mode: 'stall', workers: 1, stallMs: STALL_MS, pauseMs: 100, shared: stallerShape })),
      scenario.spawn(loopWorker('other', masters.urls(), { ...shared, pauseMs: 50, shared: kind.shared })),
    ]);

    await sleep(runFor(SHORT_MS)); // the staller injects the fault itself, once per cycle
    await scenario.stopWorkers();

    const events = scenario.history.events();
    for (const stall of events.filter((e) => e.op === 'stall' && e.phase === 'invoke')) {
      scenario.fault(`the holder blocks its event loop for ${STALL_MS} ms`, stall.t);
    }
    const ends = events.filter((e) => e.op === 'stall' && e.phase !== 'invoke');
    scenario.expect(`the holder stalled (${ends.length} times)`, ends.length > 0);
    scenario.expect(
      'after every stall the lost-lock signal fired with LockLostError',
      ends.every((e) => e.signalFired && e.code === 'LOCK_LOST'),
      tally(ends.map((e) => `${e.signalFired ? 'fired' : 'silent'} ${e.code ?? ''}`)),
    );

    let takenOver = 0;
    let rejected = 0;
    /** From the stalled lock's deadline to the takeover: how long the resource sat idle. */
    const idle: number[] = [];
    const accepted: string[] = [];
    for (const end of ends) {
      const begin = events.find((e) => e.op === 'stall' && e.phase === 'invoke' && e.token === end.token)!;
      const lateWrite = events.find((e) => e.op === 'store-write' && e.token === end.token);
      // Another process took the lock during the stall, with a higher fence, and looked at the store.
      const takeover = events.find(
        (e) => e.op === 'acquire' && e.phase === 'ok' && e.proc !== 'staller' && e.t > begin.t && e.t < end.t && e.fence! > end.fence!,
      );
      const otherRead = events.find(
        (e) => e.op === 'store-read' && e.accepted && e.token !== end.token && e.fence! > end.fence! && lateWrite && e.seq! < lateWrite.seq!,
      );
      if (takeover) {
        takenOver++;
        const deadline = events.find((e) => e.op === 'acquire' && e.phase === 'ok' && e.token === end.token)!.validUntil!;
        idle.push(Number(takeover.t - deadline) / 1e6);
      }
      if (takeover && otherRead) {
        if (lateWrite && !lateWrite.accepted) rejected++;
        else accepted.push(`fence ${end.fence}`);
      }
    }
    if (kind.name === 'semaphore') {
      // Limit 2: while the stalled permit counts, only one other worker can hold one.
      const holds = checkHistory(events).holds.filter((h) => h.proc === 'other');
      let reclaimed = 0;
      for (const end of ends) {
        const begin = events.find((e) => e.op === 'stall' && e.phase === 'invoke' && e.token === end.token)!;
        const during = holds
          .filter((h) => h.okAt < end.t && h.end > begin.t)
          .map((h) => ({ ...h, okAt: h.okAt > begin.t ? h.okAt : begin.t, end: h.end < end.t ? h.end : end.t }));
        if (mostAtOnce(during) >= 2) reclaimed++;
      }
      scenario.expect(`both other workers held a permit at once during the stall: the stalled permit was taken back (${reclaimed}/${ends.length})`, reclaimed > 0);
      const result = await scenario.finish();
      expect(failures(result)).toBe('');
      return;
    }
    scenario.expect(
      `another process got the lock during the stall (${takenOver}/${ends.length})`,
      takenOver > 0,
      `after the stalled lock's validity ended: ${spread(idle)}`,
    );
    scenario.expect(
      `every late write after a takeover was rejected by its fencing token (${rejected} rejected)`,
      rejected > 0 && accepted.length === 0,
      accepted.length ? `accepted: ${accepted.join(', ')}` : undefined,
    );

    const result = await scenario.finish();
    expect(failures(result)).toBe('');
  }, timeoutFor(SHORT_MS));
}
