import { once } from 'node:events';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockHeldError, QuorumUnreachableError, Redlock, type QuarantineNotice } from '../../lib/index.js';
import { connectMasters, disconnectAll, FRESH_FLEET } from '../support/masters.js';
import { EVERY_CLIENT_VERSION, connectLockClients, untilLockClientReady as untilReady, type ClientLibrary } from '../support/lock-clients.js';
import type { RedlockClient } from '../../lib/core/voters/clients/clients.js';
import { RedisFleet } from '../support/redis-fleet.js';

let fleet: RedisFleet;
/** The engines' clients, of the library under test. */
const opened: RedlockClient[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterEach(async () => {
  disconnectAll(opened.splice(0));
  for (const node of fleet.nodes) if (!node.running) await fleet.start(node.index);
  const cleaners = await connectMasters(fleet.urls());
  await Promise.all(cleaners.map((c) => c.flushall()));
  disconnectAll(cleaners);
});

afterAll(async () => {
  await fleet?.stopAll();
});

describe.each(EVERY_CLIENT_VERSION)('on %s', (library: ClientLibrary) => {
  async function engine(options: ConstructorParameters<typeof Redlock>[1] = {}): Promise<{ redlock: Redlock; clients: RedlockClient[] }> {
    const clients = await connectLockClients(library, fleet.urls());
    opened.push(...clients);
    const redlock = new Redlock(clients, { logger: { warn: () => {} }, ...options });
    // Identified before its first round (identity only: the quarantine still judges each vote).
    await redlock.verifyMasters();
    return { redlock, clients };
  }

  describe('fencing tokens', () => {
    it('strictly increase from one holder of a resource to the next, across engines', async () => {
      const a = await engine({ ...FRESH_FLEET, fencing: true, fenceTimeFloor: false });
      const b = await engine({ ...FRESH_FLEET, fencing: true, fenceTimeFloor: false });
      const fences: number[] = [];
      for (let i = 0; i < 6; i++) {
        const lock = await (i % 2 ? a : b).redlock.acquire('fenced', 5_000);
        fences.push(lock.fence!);
        await lock.release();
      }
      expect(fences).toEqual([1, 2, 3, 4, 5, 6]);
    });

    it('cover every resource of a multi-resource lock', async () => {
      const { redlock } = await engine({ ...FRESH_FLEET, fencing: true, fenceTimeFloor: false });
      for (let i = 0; i < 3; i++) await (await redlock.acquire('fx', 5_000)).release();
      const both = await redlock.acquire(['fx', 'fy'], 5_000);
      expect(both.fence).toBe(4);
      await both.release();
      const y = await redlock.acquire('fy', 5_000);
      expect(y.fence).toBe(5);
      await y.release();
    });

    it('are absent unless asked for, and can be asked for per call', async () => {
      const { redlock } = await engine(FRESH_FLEET);
      const plain = await redlock.acquire('unfenced', 5_000);
      expect(plain.fence).toBeUndefined();
      await plain.release();
      const [probe] = await connectMasters(fleet.urls().slice(0, 1));
      try {
        expect(await probe!.exists('redlock-fence:unfenced')).toBe(0);
      } finally {
        disconnectAll([probe!]);
      }
      const fenced = await redlock.acquire('unfenced', 5_000, { fencing: true });
      expect(fenced.fence).toBeGreaterThan(Date.now() * 1000 - 60_000_000);
      await fenced.release();
    });

    it('go backwards when a majority loses its counters, unless the time floor holds them up', async () => {
      const plain = await engine({ ...FRESH_FLEET, fencing: true, fenceTimeFloor: false });
      const floored = await engine({ ...FRESH_FLEET, fencing: true });
      for (let i = 0; i < 5; i++) await (await plain.redlock.acquire('loss', 5_000)).release();
      const before = await floored.redlock.acquire('loss', 5_000);
      await before.release();

      await Promise.all([fleet.restart(0), fleet.restart(1)]); // empty: counters gone on a majority
      await fleet.kill(2); // so the next majority is exactly the two that forgot
      await Promise.all([0, 1].flatMap((i) => [plain.clients[i]!, floored.clients[i]!]).map(untilReady));

      const unprotected = await plain.redlock.acquire('loss', 5_000);
      expect(unprotected.fence).toBeLessThan(before.fence!); // the failure the floor exists for
      await unprotected.release();
      const protectedLock = await floored.redlock.acquire('loss', 5_000);
      expect(protectedLock.fence).toBeGreaterThan(before.fence!);
      await protectedLock.release();
    });
  });

  describe('restart quarantine', () => {
    it('does not count masters that started within the window, and says so', async () => {
      const notices: QuarantineNotice[] = [];
      // A generous round deadline: under load, identifying the masters must not turn into a timeout.
      const { redlock } = await engine({ restartQuarantineMs: 600_000, nodeTimeoutMs: 5_000 });
      redlock.on('quarantine', (notice: QuarantineNotice) => notices.push(notice));
      const error = await redlock.acquire('young', 5_000, { waitTimeoutMs: 0 }).catch((e) => e);
      expect(error).toBeInstanceOf(QuorumUnreachableError);
      // The round is decided once two of three are quarantined; the third may not have said who it is yet.
      const statuses: string[] = error.nodes.map((n: { status: string }) => n.status);
      expect(statuses.filter((s) => s === 'quarantined').length).toBeGreaterThanOrEqual(2);
      expect(statuses.every((s) => s === 'quarantined' || s === 'pending')).toBe(true);
      const every = fleet.nodes.map((n) => `127.0.0.1:${n.port}`).sort();
      await expect.poll(() => notices.map((n) => n.node).sort()).toEqual(every);
      expect(notices.every((n) => n.reason === 'recent start' && n.remainingMs > 590_000)).toBe(true);
    });

    it('waits a quarantine out within the wait budget', async () => {
      const { redlock } = await engine({ restartQuarantineMs: 1 });
      const lock = await redlock.acquire('patient', 5_000, { waitTimeoutMs: 10_000 });
      await lock.release();
    });

    it('prevents the double grant a master restarted empty would give (and without it, the grant happens)', async () => {
      // A holds a bare majority {0, 1}: master 2 is down when A acquires.
      const a = await engine(FRESH_FLEET);
      await fleet.kill(2);
      const held = await a.redlock.acquire('split', 30_000);
      await fleet.start(2);

      // A window far longer than this fleet has lived: every master is young at the guarded engine's
      // first sight, however long the tests before took (with 30 s, a slow run saw masters 0 and 1 as old).
      const guarded = await engine({ restartQuarantineMs: 600_000 });
      const unguarded = await engine(FRESH_FLEET);
      const notices: QuarantineNotice[] = [];
      guarded.redlock.on('quarantine', (n: QuarantineNotice) => notices.push(n));
      // Both engines have identified master 1 before it restarts, so they can see its run_id change.
      await expect(guarded.redlock.tryAcquire('split', 30_000)).rejects.toBeInstanceOf(QuorumUnreachableError);
      expect(await unguarded.redlock.tryAcquire('split', 30_000)).toBeNull();

      await fleet.restart(1); // without persistence: A's key on master 1 is gone
      await Promise.all([...guarded.clients, ...unguarded.clients].map(untilReady));

      const guardedTry = await guarded.redlock.tryAcquire('split', 30_000).catch((e) => e);
      expect(guardedTry).not.toHaveProperty('token');
      expect([QuorumUnreachableError, LockHeldError].some((type) => guardedTry instanceof type) || guardedTry === null).toBe(true);
      // The round may be decided (masters 0 and 2 said no) before master 1 has told who it is.
      await expect.poll(() => notices.some((n) => n.node === `127.0.0.1:${fleet.nodes[1]!.port}`)).toBe(true);

      // The control: without quarantine, masters 1 and 2 (both empty) elect a second holder.
      const second = await unguarded.redlock.tryAcquire('split', 30_000);
      expect(second).not.toBeNull();
      expect(held.remainingMs()).toBeGreaterThan(0);
    });

    it('with quarantineAtFirstSight false, trusts young masters at first sight and still quarantines a restart it sees', async () => {
      // The window (10 min) covers every master's age: by default all three would be quarantined.
      const { redlock, clients } = await engine({ restartQuarantineMs: 600_000, quarantineAtFirstSight: false, nodeTimeoutMs: 5_000 });
      const notices: QuarantineNotice[] = [];
      redlock.on('quarantine', (notice: QuarantineNotice) => notices.push(notice));
      const lock = await redlock.acquire('first-sight', 5_000, { waitTimeoutMs: 0 });
      expect(lock.rounds[0]!.filter((outcome) => outcome.status === 'granted').length).toBeGreaterThanOrEqual(2);
      await lock.release();
      expect(notices).toEqual([]);

      await fleet.restart(0);
      await untilReady(clients[0]!);
      const quarantine = once(redlock, 'quarantine');
      const next = await redlock.acquire('first-sight', 5_000, { waitTimeoutMs: 0 });
      const [notice] = (await quarantine) as [QuarantineNotice];
      expect(notice).toMatchObject({ node: `127.0.0.1:${fleet.nodes[0]!.port}`, reason: 'run_id changed' });
      // The two others still make a quorum; the restarted one does not vote.
      await expect.poll(() => next.rounds[0]![0]!.status).toBe('quarantined');
      await next.release();
    });

    it('notices a master replaced behind the same address by its run_id', async () => {
      const { redlock, clients } = await engine({ restartQuarantineMs: 1 });
      await (await redlock.acquire('replaced', 5_000)).release(); // identifies every master
      const quarantine = once(redlock, 'quarantine');
      await fleet.restart(0);
      await untilReady(clients[0]!);
      await redlock.tryAcquire('replaced', 5_000).catch(() => null);
      const [notice] = (await quarantine) as [QuarantineNotice];
      expect(notice.reason).toBe('run_id changed');
    });
  });
});
