import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { AcquireAbortedError, type Lock } from '../../lib/index.js';
import { keysOn, PATIENT, separateEngine } from '../support/masters.js';
import { enlisted, heldEverywhere } from '../support/enlisted.js';
import { fileFleet } from '../support/file-fleet.js';

const { fleet: masters, opened } = fileFleet(3);

const engine = () => separateEngine(masters().urls(), opened, PATIENT);

/** How an acquire call ended: the lock it got, or the code and reason it was rejected with. */
function outcomeOf(call: Promise<Lock | null>): Promise<{ lock: Lock | null } | { code: string | undefined; reason: unknown }> {
  return call.then(
    (lock) => ({ lock }),
    (error: unknown) => ({ code: (error as { code?: string }).code, reason: error instanceof AcquireAbortedError ? error.cause : undefined }),
  );
}

const aborted = (reason: string) => ({ code: 'ACQUIRE_ABORTED', reason });

describe('releaseAll makes every acquire call of the engine in progress give up', () => {
  it("callers queued in the process's own line behind a waiter in the masters' queue, too", async () => {
    const a = await engine();
    const b = await engine();
    const held = await a.redlock.acquire('own-line', 10_000);
    await heldEverywhere(a.clients, 'redlock:own-line');
    // The first is the head of b's line and waits in the masters' queue; the other two wait behind it in b.
    const calls = [1, 2, 3].map(() => outcomeOf(b.redlock.acquire('own-line', 10_000, { waitTimeoutMs: 20_000 })));
    await enlisted(a.clients, 'own-line');
    await b.redlock.releaseAll('own-line shutdown');
    await held.release();
    expect(await Promise.all(calls)).toEqual([1, 2, 3].map(() => aborted('own-line shutdown')));
    // Nothing of b's is left: the release freed the key, and nobody of b's took it since.
    await expect.poll(async () => (await keysOn(a.clients, '*own-line')).flat()).toEqual([]);
    expect(await a.redlock.tryAcquire('own-line', 10_000)).not.toBeNull();
  });

  it('callers standing by for a lock the engine itself holds, and those behind them', async () => {
    const b = await engine();
    const held = await b.redlock.acquire('own-holder', 10_000);
    // The first stands by for b's own holder (no round); the second waits in b's line behind it.
    const calls = [1, 2].map(() => outcomeOf(b.redlock.acquire('own-holder', 10_000, { waitTimeoutMs: 20_000 })));
    await b.redlock.releaseAll('own-holder shutdown');
    expect(held.released).toBe(true);
    expect(await Promise.all(calls)).toEqual([1, 2].map(() => aborted('own-holder shutdown')));
    await expect.poll(async () => (await keysOn(b.clients, '*own-holder')).flat()).toEqual([]);
  });

  it('a caller pausing between rounds without wake-ups: its pause ends at once, not when its timer runs out', async () => {
    const a = await engine();
    // No wake-ups: a refused caller backs off for retryDelayMs, here longer than the test may run.
    const b = await separateEngine(masters().urls(), opened, { ...PATIENT, wakeups: false, retryDelayMs: 120_000 });
    const held = await a.redlock.acquire('backing-off', 10_000);
    await heldEverywhere(a.clients, 'redlock:backing-off');
    // Fenced: its first round is the queue's script, so its entry says it is in its pause.
    const call = outcomeOf(b.redlock.acquire('backing-off', 10_000, { fencing: true, waitTimeoutMs: 300_000 }));
    await enlisted(a.clients, 'backing-off');
    await b.redlock.releaseAll('backing-off shutdown');
    expect(await call).toEqual(aborted('backing-off shutdown'));
    await held.release();
  });

  it('a try whose round is out: what it wins is given back before releaseAll resolves', async () => {
    const b = await engine();
    const call = outcomeOf(b.redlock.tryAcquire('in-flight', 10_000));
    await b.redlock.releaseAll('in-flight shutdown');
    // Decided at a quorum: the last master may still be applying the release.
    await expect.poll(async () => (await keysOn(b.clients, '*in-flight')).flat()).toEqual([]);
    expect(await call).toEqual(aborted('in-flight shutdown'));
  });
});
