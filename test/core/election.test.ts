import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { AcquireAbortedError, InvalidArgumentError, type LeadershipEnd, type RedlockOptions } from '../../lib/core/index.js';
import { InMemoryRedlock } from '../../lib/testing/index.js';
import { PATIENT, separateEngine } from '../support/masters.js';
import { fileFleet } from '../support/file-fleet.js';

const { fleet: masters, opened } = fileFleet(3);

const engine = (options: RedlockOptions = {}) => separateEngine(masters().urls(), opened, { ...PATIENT, ...options });

describe('election: campaign, resign, observe', () => {
  it('elects one leader; an observer sees who and which term; a resignation hands over at once with a larger term', async () => {
    const a = await engine();
    const b = await engine();
    const watcher = await engine();
    const name = 'billing-consumer';
    const leaderA = await a.redlock.election(name).campaign('pod-a');
    expect(leaderA.isLeader).toBe(true);
    expect(leaderA.term).toBeGreaterThan(0);
    await expect.poll(() => watcher.redlock.election(name).leader(), { timeout: 10_000 }).toMatchObject({ election: name, identity: 'pod-a', term: leaderA.term });
    let bWon = false;
    const campaignB = b.redlock.election(name).campaign('pod-b').then((leadership) => ((bWon = true), leadership));
    // b waits in the queue while a leads: a few of a's renewals would not let it in either.
    const stillA = await watcher.redlock.election(name).leader();
    expect(stillA?.identity).toBe('pod-a');
    expect(bWon).toBe(false);
    await leaderA.resign();
    expect(leaderA.signal.aborted).toBe(true);
    expect(leaderA.isLeader).toBe(false);
    const leaderB = await campaignB;
    expect(leaderB.term).toBeGreaterThan(leaderA.term);
    await expect.poll(() => watcher.redlock.election(name).leader(), { timeout: 10_000 }).toMatchObject({ identity: 'pod-b', term: leaderB.term });
    await leaderB.resign();
    await expect.poll(() => watcher.redlock.election(name).leader(), { timeout: 10_000 }).toBeNull();
  });

  it("replaces a leader that went silent once its lease runs out, and tells the old one it lost", async () => {
    const a = await engine();
    const b = await engine();
    const election = a.redlock.election('silent', { leaseMs: 600 });
    const leaderA = await election.campaign('pod-a');
    const ends: LeadershipEnd[] = [];
    election.on('ended', (end: LeadershipEnd) => ends.push(end));
    const campaignB = b.redlock.election('silent', { leaseMs: 600 }).campaign('pod-b');
    // a's connections drop: its renewals fail, as a crashed or cut-off leader's would.
    for (const client of a.clients) client.disconnect();
    await once(leaderA.signal, 'abort');
    expect(ends).toMatchObject([{ election: 'silent', identity: 'pod-a', term: leaderA.term, reason: 'lost' }]);
    const leaderB = await campaignB;
    expect(leaderB.term).toBeGreaterThan(leaderA.term);
    await leaderB.resign();
  });

  it('keeps leading past maxExtensions: a lease is renewed for as long as the leader lives', async () => {
    const a = await engine({ maxExtensions: 2 });
    const leader = await a.redlock.election('long', { leaseMs: 1_000 }).campaign('pod-a');
    // Renewed every 500 ms or so: well past two renewals.
    await expect.poll(() => leader.heldMs, { interval: 100, timeout: 10_000 }).toBeGreaterThan(3_000);
    expect(leader.isLeader).toBe(true);
    expect(leader.signal.aborted).toBe(false);
    await leader.resign();
  });

  it('releaseAll (shutdown) resigns: reason resigned, and the next candidate leads', async () => {
    const a = await engine();
    const b = await engine();
    const election = a.redlock.election('shutdown');
    const leaderA = await election.campaign('pod-a');
    const ended = once(election, 'ended') as Promise<[LeadershipEnd]>;
    const campaignB = b.redlock.election('shutdown').campaign('pod-b');
    await a.redlock.releaseAll();
    const [end] = await ended;
    expect(end.reason).toBe('resigned');
    expect((await campaignB).term).toBeGreaterThan(leaderA.term);
  });

  it('refuses a bad identity or name, and a campaign stops at its signal', async () => {
    const a = await engine();
    expect(() => a.redlock.election('')).toThrow(InvalidArgumentError);
    await expect(a.redlock.election('x').campaign('')).rejects.toThrow(InvalidArgumentError);
    await expect(a.redlock.election('x').campaign('a\nb')).rejects.toThrow(/identity/);
    const held = await a.redlock.election('busy').campaign('pod-a');
    const b = await engine();
    const controller = new AbortController();
    const waiting = b.redlock.election('busy').campaign('pod-b', { signal: controller.signal });
    controller.abort(new Error('shutting down'));
    await expect(waiting).rejects.toThrow(AcquireAbortedError);
    await held.resign();
  });

  it('works alike on the in-memory engine', async () => {
    const redlock = new InMemoryRedlock();
    const election = redlock.election('jobs');
    const first = await election.campaign('one');
    const second = election.campaign('two');
    expect(await election.leader()).toMatchObject({ identity: 'one', term: first.term });
    await first.resign();
    const next = await second;
    expect(next.term).toBeGreaterThan(first.term);
    expect(await election.leader()).toMatchObject({ identity: 'two' });
    await redlock.releaseAll();
    expect(await election.leader()).toBeNull();
    redlock.close();
  });
});
