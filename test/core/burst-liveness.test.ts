import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { QuorumUnreachableError, Redlock, type Lock, type RedlockOptions } from '../../lib/index.js';
import { SHARED_CONTENDERS } from '../../lib/core/kinds/shared/shared-holds.js';
import { nodeTimeoutMs, resolveOptions } from '../../lib/core/lock/redlock-options.js';
import { connectMasters, FRESH_FLEET, sharedAcquireWaiters, watchCalls } from '../support/masters.js';
import { fileFleet } from '../support/file-fleet.js';

// Issue 28, item 6: bursts of shared waiters on healthy masters. A process must not read its own
// slowness (a burst of its own scripts, a busy event loop) as masters being down. These engines
// keep the default node timeout on purpose: the default is what is under test.

const { fleet: masters, opened } = fileFleet(3, { emptyAfterEach: true });
const engines: Redlock[] = [];
// After-hooks run last registered first: the engines close before the fleet's hook closes their clients.
afterEach(() => {
  for (const engine of engines.splice(0)) engine.close();
});

async function engine(options: RedlockOptions = {}): Promise<{ redlock: Redlock; clients: Redis[] }> {
  const clients = await connectMasters(masters().urls());
  opened.push(...clients);
  const redlock = new Redlock(clients, { ...FRESH_FLEET, logger: { warn: () => {} }, ...options });
  engines.push(redlock);
  await redlock.verifyMasters();
  return { redlock, clients };
}

/**
 * The shared-acquire scripts the engine sends one master from now on: how many, and from which
 * callers (their waiter ids). Pacing is about callers: a caller the line let through may still
 * have a script out on a slow master after it got its hold elsewhere, so scripts out at once, or
 * the masters' queue as another client reads it, may count more than the line's width.
 */
function sharedScriptsSent(client: Redis): { sent: number; callers: Set<string> } {
  const seen = { sent: 0, callers: new Set<string>() };
  watchCalls(client, 'evalsha', (args) => {
    // One request alone, or several in a batch: each counts as a script sent.
    for (const waiter of sharedAcquireWaiters(args)) {
      seen.sent++;
      seen.callers.add(waiter);
    }
  });
  return seen;
}

/** Settles every call; the errors by name. */
async function outcomes(calls: Promise<Lock>[]): Promise<{ locks: Lock[]; errors: Record<string, number> }> {
  const settled = await Promise.allSettled(calls);
  const locks: Lock[] = [];
  const errors: Record<string, number> = {};
  for (const result of settled) {
    if (result.status === 'fulfilled') locks.push(result.value);
    else errors[(result.reason as Error).name] = (errors[(result.reason as Error).name] ?? 0) + 1;
  }
  return { locks, errors };
}

describe('a burst of shared waiters in one process, on healthy masters', () => {
  for (const readers of [300, 1_000]) {
    it(`${readers} readers queued behind a writer all get their hold, ${SHARED_CONTENDERS} at a time on the masters`, async () => {
      const { redlock, clients } = await engine();
      const writer = await redlock.acquire('burst', 10_000);
      const perMaster = clients.map(sharedScriptsSent);
      // The wait budget is generous: the outcome is under test (before: 208 to all of them failed
      // with QuorumUnreachableError within a second), not how fast a loaded machine serves them.
      /** Readers whose lock had validity left as it came (read later, the first ones' 10 s may be over). */
      let validOnArrival = 0;
      const calls = Array.from({ length: readers }, () =>
        redlock.acquire('burst', 10_000, { mode: 'read', waitTimeoutMs: 60_000 }).then((lock) => {
          if (lock.mode === 'read' && lock.remainingMs() > 0) validOnArrival++;
          return lock;
        }),
      );
      // Released once the first readers have asked every master (and been refused and queued).
      while (perMaster.some((seen) => seen.sent < SHARED_CONTENDERS)) await new Promise((resolve) => setImmediate(resolve));
      // Queued on the masters behind the writer (the line's first readers), before the release.
      await expect.poll(() => clients[0]!.hlen('redlock-queue:burst')).toBeGreaterThan(0);
      // Paced: while the writer holds, no reader leaves the line, so no more of them than its
      // width have asked any master (before: all of them, at once).
      for (const seen of perMaster) expect(seen.callers.size).toBeLessThanOrEqual(SHARED_CONTENDERS);
      await writer.release();
      const result = await outcomes(calls);
      // Before the pacing, 208 to all of them failed. Beside a second copy of the suite (a load
      // average of 14 on two cores) the masters themselves went over a second without answering
      // some readers three rounds running: 22 of 1000 gave up as a majority outage, which they
      // were, for this process. More than 5% is the process reading its own burst as one.
      const unreachable = result.errors['QuorumUnreachableError'] ?? 0;
      expect({ ...result.errors, QuorumUnreachableError: 0 }).toEqual({ QuorumUnreachableError: 0 });
      expect(unreachable).toBeLessThanOrEqual(readers * 0.05);
      expect(result.locks).toHaveLength(readers - unreachable);
      expect(validOnArrival).toBe(result.locks.length);
      // Bounded rounds: a few per reader (refused and queued, woken, granted, and a retry when a
      // release found others ahead of it), not a storm: 3.6 to 5.4 per reader measured on two
      // loaded cores, depending on how the wake-ups and grants interleave.
      for (const seen of perMaster) expect(seen.sent).toBeLessThanOrEqual(8 * readers);
      await Promise.all(result.locks.map((lock) => lock.release()));
    }, 120_000);
  }

  it('10 000 callers for 10 permits all get one in turn', async () => {
    const { redlock, clients } = await engine();
    const perMaster = clients.map(sharedScriptsSent);
    let holding = 0;
    let most = 0;
    /** Per master, how many callers had asked it when the first permit was had. */
    let askedByFirstGrant: number[] | undefined;
    const calls = Array.from({ length: 10_000 }, async () => {
      const permit = await redlock.acquire('permits', 10_000, { limit: 10, waitTimeoutMs: 120_000 });
      askedByFirstGrant ??= perMaster.map((seen) => seen.callers.size);
      most = Math.max(most, ++holding);
      holding--;
      await permit.release();
      return permit;
    });
    const result = await outcomes(calls);
    expect(result.errors).toEqual({});
    expect(result.locks).toHaveLength(10_000);
    expect(most).toBeLessThanOrEqual(10);
    // Paced: the first permits went to the first callers the line let through, no more of them
    // than there are permits (before: all 10 000 asked every master at once).
    expect(askedByFirstGrant!.every((asked) => asked > 0 && asked <= 10)).toBe(true);
  }, 240_000);

  it('tryAcquire of readers is not held back by the line: all 100 at once get their hold', async () => {
    const { redlock } = await engine();
    const { locks, errors } = await outcomes(
      Array.from({ length: 100 }, () => redlock.tryAcquire('try-readers', 10_000, { mode: 'read' }).then((lock) => lock!)),
    );
    expect(errors).toEqual({});
    expect(locks.every((lock) => lock !== null)).toBe(true);
    await Promise.all(locks.map((lock) => lock.release()));
  });
});

describe('the round deadline counts the masters’ time, not this process’s', () => {
  it('a reply that came while the event loop was blocked past the deadline still counts', async () => {
    // Short on purpose: the round's timer is due long before this process reads the replies.
    const { redlock } = await engine({ nodeTimeoutMs: 20 });
    for (const mode of ['write', 'read'] as const) {
      // From the check phase, so that the next phase to run is the timers', before the poll for I/O.
      await new Promise((resolve) => setImmediate(resolve));
      const attempt = redlock.tryAcquire(`blocked-${mode}`, 10_000, { mode }).catch((error: unknown) => error);
      const until = performance.now() + 200;
      while (performance.now() < until) {
        // Busy: a long synchronous task of the application's.
      }
      const lock = await attempt;
      expect(lock).not.toBeInstanceOf(QuorumUnreachableError);
      expect((lock as Lock).remainingMs()).toBeGreaterThan(0);
      await (lock as Lock).release();
    }
  });

  it('by default a round waits up to 1 s for the masters (10% of the ttl, within [1, 1000] ms)', () => {
    const options = resolveOptions();
    expect(nodeTimeoutMs(options, 10_000)).toBe(1_000);
    expect(nodeTimeoutMs(options, 60_000)).toBe(1_000);
    expect(nodeTimeoutMs(options, 2_000)).toBe(200);
    expect(nodeTimeoutMs(resolveOptions({ nodeTimeoutMs: 50 }), 60_000)).toBe(50);
  });
});
