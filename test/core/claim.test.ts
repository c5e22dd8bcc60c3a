import { describe, expect, it } from 'vitest';
import type { RedlockOptions } from '../../lib/core/index.js';
import { InMemoryRedlock } from '../../lib/testing/index.js';
import { PATIENT, separateEngine } from '../support/masters.js';
import { heldEverywhere } from '../support/enlisted.js';
import { fileFleet } from '../support/file-fleet.js';

const { fleet: masters, opened } = fileFleet(3);

const engine = (options: RedlockOptions = {}) => separateEngine(masters().urls(), opened, { ...PATIENT, ...options });

describe('claim: a lock left to expire', () => {
  it('is taken once: the claimer and everyone else are refused until its ttl is over, whatever the claimer does', async () => {
    const a = await engine();
    const b = await engine();
    expect(await a.redlock.claim('job#tick:1', 60_000)).toBe(true);
    await heldEverywhere(a.clients, 'redlock:job#tick:1');
    expect(await a.redlock.claim('job#tick:1', 60_000)).toBe(false);
    expect(await b.redlock.claim('job#tick:1', 60_000)).toBe(false);
    expect(await b.redlock.tryAcquire('job#tick:1', 60_000)).toBeNull();
    // Not held as far as the engine goes: releaseAll at shutdown leaves it on the masters.
    expect(a.redlock.heldLocks.size).toBe(0);
    await a.redlock.releaseAll();
    expect(await b.redlock.claim('job#tick:1', 60_000)).toBe(false);
    // Its ttl on every master is the one it was claimed with, less the time gone.
    const ttls = await Promise.all(a.clients.map((client) => client.pttl('redlock:job#tick:1')));
    for (const ttl of ttls) expect(ttl).toBeGreaterThan(50_000);
  });

  it('lapses at its ttl, and a resource another owner holds cannot be claimed', async () => {
    const a = await engine();
    const b = await engine();
    // Short, but long enough that one round on a loaded host leaves it validity (50 ms did not).
    expect(await a.redlock.claim('lease', 1_000)).toBe(true);
    await expect.poll(() => b.redlock.claim('lease', 60_000), { interval: 50, timeout: 10_000 }).toBe(true);
    const held = await a.redlock.acquire('held', 60_000);
    expect(await b.redlock.claim('held', 60_000)).toBe(false);
    await held.release();
    expect(await b.redlock.claim('held', 60_000)).toBe(true);
  });

  it("leaves the restart quarantine's window at the longest lock ttl: a day-long claim does not stop the locks held or to come", async () => {
    // The window is the longest ttl used (restartQuarantineMs left at its default): 1 s here.
    const { redlock } = await engine({ restartQuarantineMs: 'max-ttl' });
    redlock.expectTtl(1_000);
    await expect.poll(async () => (await redlock.checkMasters()).available, { interval: 50, timeout: 10_000 }).toBe(true);
    const held = await redlock.acquire('work', 1_000);
    expect(await redlock.claim('daily-report#tick:1', 86_400_000)).toBe(true);
    // With the claim's ttl as the window, every master (up for seconds) would be young again.
    expect((await redlock.checkMasters()).available).toBe(true);
    await held.extend(1_000);
    expect(held.remainingMs()).toBeGreaterThan(0);
    await held.release();
    const next = await redlock.tryAcquire('work', 1_000);
    expect(next).not.toBeNull();
    await next!.release();
  });

  it('works alike on the in-memory engine', async () => {
    const redlock = new InMemoryRedlock();
    expect(await redlock.claim('tick', 60_000)).toBe(true);
    expect(await redlock.claim('tick', 60_000)).toBe(false);
    await redlock.releaseAll();
    expect(await redlock.claim('tick', 60_000)).toBe(false);
    redlock.close();
  });
});
