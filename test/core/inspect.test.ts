import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '../../lib/core/index.js';
import { InMemoryRedlock } from '../../lib/testing/index.js';
import { PATIENT, separateEngine } from '../support/masters.js';
import { fileFleet } from '../support/file-fleet.js';

const { fleet: masters, opened } = fileFleet(3);

const engine = (options = {}) => separateEngine(masters().urls(), opened, { ...PATIENT, ...options });
const fingerprint = (token: string) => createHash('sha1').update(token).digest('hex').slice(0, 12);
const dbsizes = (clients: { dbsize(): Promise<number> }[]) => Promise.all(clients.map((client) => client.dbsize()));

describe('inspect: what a resource looks like on the masters, without taking it', () => {
  it('says free, then held by which lock (a fingerprint, never the token), until when, with its fence; and writes nothing', async () => {
    const { redlock, clients } = await engine();
    const [free] = await redlock.inspect('inspect:order:1');
    expect(free).toMatchObject({ resource: 'inspect:order:1', state: 'free', waiting: 0 });
    expect(free!.masters.map((master) => master.state)).toEqual(['free', 'free', 'free']);

    const lock = await redlock.acquire('inspect:order:1', 10_000, { fencing: true });
    // A release or grant settles at a quorum: the third master may lag.
    await expect.poll(async () => (await redlock.inspect('inspect:order:1'))[0]!.masters.filter((m) => m.state === 'held').length).toBe(3);
    const before = await dbsizes(clients);
    const [held] = await redlock.inspect(['inspect:order:1']);
    expect(await dbsizes(clients)).toEqual(before);
    expect(held).toMatchObject({ state: 'held', kind: 'exclusive', holder: fingerprint(lock.token), fence: lock.fence });
    expect(JSON.stringify(held)).not.toContain(lock.token);
    expect(held!.freesInMs!.earliestMs).toBeLessThanOrEqual(held!.freesInMs!.latestMs);
    expect(held!.freesInMs!.latestMs).toBeLessThanOrEqual(10_000);
    expect(held!.freesInMs!.earliestMs).toBeGreaterThan(5_000);
    await lock.release();
  });

  it('counts the callers waiting in the fair queue', async () => {
    const { redlock } = await engine();
    const other = await engine();
    const lock = await redlock.acquire('inspect:queue', 10_000);
    const waiting = other.redlock.acquire('inspect:queue', 10_000, { waitTimeoutMs: 10_000 });
    await expect.poll(async () => (await redlock.inspect('inspect:queue'))[0]!.waiting).toBe(1);
    await lock.release();
    await (await waiting).release();
  });

  it('tells readers and permits apart, with how many hold and the limit', async () => {
    const { redlock } = await engine();
    // Fenced: unfenced readers of one process asking at once share one hold on the masters.
    const readers = await Promise.all([0, 1].map(() => redlock.acquire('inspect:doc', 10_000, { mode: 'read', fencing: true })));
    const permits = await Promise.all([redlock.acquire('inspect:pool', 10_000, { limit: 3 }), redlock.acquire('inspect:pool', 10_000, { limit: 3 })]);
    await expect.poll(() => redlock.inspect(['inspect:doc', 'inspect:pool'])).toMatchObject([
      { resource: 'inspect:doc', state: 'held', kind: 'read', holders: 2 },
      { resource: 'inspect:pool', state: 'held', kind: 'permits', limit: 3, holders: 2 },
    ]);
    await Promise.all([...readers, ...permits].map((lock) => lock.release()));
  });

  it('says unknown when too few masters answer, or only masters in restart quarantine do; decides with a majority', async () => {
    const { redlock } = await engine();
    const lock = await redlock.acquire('inspect:outage', 30_000);
    await expect.poll(async () => (await redlock.inspect('inspect:outage'))[0]!.masters.filter((m) => m.state === 'held').length).toBe(3);
    await masters().kill(2);
    try {
      expect((await redlock.inspect('inspect:outage'))[0]).toMatchObject({ state: 'held', kind: 'exclusive' });
      await masters().kill(1);
      const [unknown] = await redlock.inspect('inspect:outage');
      expect(unknown!.state).toBe('unknown');
      expect(unknown!.masters.map((master) => master.state)).toEqual(['held', 'unknown', 'unknown']);
      expect(unknown!.masters[1]!.error).toBeTruthy();
    } finally {
      await masters().start(1);
      await masters().start(2);
    }
    // Masters 1 and 2 came back empty: an engine with the restart quarantine on does not count them.
    const guarded = await engine({ restartQuarantineMs: 60_000 });
    const [quarantined] = await guarded.redlock.inspect('inspect:outage');
    expect(quarantined!.state).toBe('unknown');
    expect(quarantined!.masters.filter((master) => /quarantin/.test(master.error ?? '')).length).toBeGreaterThanOrEqual(2);
    await lock.release();
  });

  it('refuses a bad resource list', async () => {
    const { redlock } = await engine();
    await expect(redlock.inspect([])).rejects.toThrow(InvalidArgumentError);
    await expect(redlock.inspect(42 as unknown as string)).rejects.toThrow(InvalidArgumentError);
  });

  it('works alike on the in-memory engine', async () => {
    const redlock = new InMemoryRedlock();
    const lock = await redlock.acquire('doc', 10_000, { fencing: true });
    expect(await redlock.inspect('doc')).toMatchObject([{ state: 'held', kind: 'exclusive', holder: fingerprint(lock.token), fence: lock.fence, waiting: 0 }]);
    await lock.release();
    expect(await redlock.inspect('doc')).toMatchObject([{ state: 'free' }]);
    redlock.makeQuorumUnreachable();
    expect(await redlock.inspect('doc')).toMatchObject([{ state: 'unknown' }]);
    redlock.close();
  });
});
