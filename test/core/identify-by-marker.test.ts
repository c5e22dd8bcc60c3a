import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { Redlock, type QuarantineNotice, type RedlockOptions } from '../../lib/core/index.js';
import { freePort } from '../support/free-port.js';
import { fileFleet } from '../support/file-fleet.js';
import { connectMasters, lockClient, untilReady } from '../support/masters.js';

// `identifyBy: 'marker'`, for users who may not run INFO: what it catches (a master that lost its
// keys comes back without its marker) and what it cannot (a master that reloads an older snapshot
// brings its marker back, not the locks granted since). The ACL side (a user without INFO) is in
// acl-user.test.ts.

const WINDOW_MS = 5_000;
const MARKER: RedlockOptions = { identifyBy: 'marker', restartQuarantineMs: WINDOW_MS, logger: { warn: () => {} } };

const { fleet: masters, opened } = fileFleet(3, { emptyAfterEach: true });

/** Plain connections to every master, for the test's own reads and writes. */
async function admins(): Promise<Redis[]> {
  const clients = await connectMasters(masters().urls());
  opened.push(...clients);
  return clients;
}

/** An engine on the masters at `reachable`; the others are a port nobody listens on. */
async function engineOn(reachable: readonly number[], options: RedlockOptions): Promise<{ redlock: Redlock; clients: Redis[]; notices: QuarantineNotice[] }> {
  const clients = await Promise.all(
    masters().urls().map(async (url, index) => (reachable.includes(index) ? (await connectMasters([url]))[0]! : lockClient(`redis://127.0.0.1:${await freePort()}`))),
  );
  opened.push(...clients);
  const redlock = new Redlock(clients, options);
  const notices: QuarantineNotice[] = [];
  redlock.on('quarantine', (notice: QuarantineNotice) => notices.push(notice));
  await redlock.verifyMasters();
  return { redlock, clients, notices };
}

/** On every master, a marker written a minute ago (as by engines that have run for a while). */
async function oldMarkers(clients: readonly Redis[]): Promise<void> {
  await Promise.all(
    clients.map(async (client, index) => {
      const [seconds] = (await client.time()) as unknown as [string];
      await client.set('redlock-fence:', `old-${index} ${Number(seconds) * 1000 - 60_000}`);
    }),
  );
}

describe("identifyBy: 'marker'", () => {
  it('keeps a marker of the data set on each master, and tells two names of one master apart by it', async () => {
    const clients = await admins();
    // Markers written now: a data set this young waits out the window before it votes.
    const { redlock, notices } = await engineOn([0, 1, 2], { ...MARKER, restartQuarantineMs: 300 });
    const markers = await Promise.all(clients.map((client) => client.get('redlock-fence:')));
    expect(markers.every((marker) => /^\S+ \d+$/.test(marker ?? ''))).toBe(true);
    expect(new Set(markers.map((marker) => marker!.split(' ')[0])).size).toBe(3);
    const lock = await redlock.acquire('marked', 5_000, { fencing: true });
    expect(notices.map((notice) => notice.reason)).toEqual(['recent start', 'recent start', 'recent start']);
    await lock.release();

    // The same master twice is one voter, as with run_ids.
    // One server under two names (127.0.0.1 and localhost): only the marker can tell.
    const twiceClients = await connectMasters([masters().urls()[0]!, masters().urls()[0]!.replace('127.0.0.1', 'localhost'), masters().urls()[1]!]);
    opened.push(...twiceClients);
    const twice = new Redlock(twiceClients, MARKER);
    await expect(twice.verifyMasters()).rejects.toThrow(/same server/);
    twice.close();
  });

  it('catches a master that lost its keys: restarted empty, it comes back without the marker and waits out the quarantine', async () => {
    const clients = await admins();
    await oldMarkers(clients);
    // A holds the lock on exactly {0, 1}; B reaches all three and has seen master 0 before its restart.
    const a = await engineOn([0, 1], MARKER);
    const b = await engineOn([0, 1, 2], MARKER);
    const held = await a.redlock.acquire('kept', 30_000);
    await masters().restart(0); // empty: A's key there is gone, and so is the marker
    await untilReady(clients[0]!);
    await untilReady(b.clients[0]!); // B's own connection is back: master 0 answers it, and is judged
    // Without the quarantine, {0, 2} would grant B the lock A holds.
    expect(await b.redlock.tryAcquire('kept', 30_000)).toBeNull();
    expect(b.notices.map((notice) => notice.node)).toContain(`127.0.0.1:${masters().nodes[0]!.port}`);
    expect(b.notices.find((notice) => notice.node === `127.0.0.1:${masters().nodes[0]!.port}`)?.reason).toBe('new data set');
    // An engine that first sees master 0 now counts its data set's age from the new marker.
    const c = await engineOn([0, 1, 2], MARKER);
    expect(await c.redlock.tryAcquire('kept', 30_000)).toBeNull();
    expect(c.notices.map((notice) => notice.reason)).toEqual(['recent start']);
    void held;
  });

  it('cannot see a master that reloads an older snapshot: its marker comes back, the lock granted since does not (INFO sees the restart)', async () => {
    const clients = await admins();
    await oldMarkers(clients);
    await clients[0]!.save(); // master 0's snapshot: the marker, and no lock yet
    const a = await engineOn([0, 1], MARKER);
    const held = await a.redlock.acquire('snapshot', 30_000);
    // Both have seen every master before the restart (and trust what they first saw: the fleet is young).
    const byInfo = await engineOn([0, 1, 2], { ...MARKER, identifyBy: 'info', quarantineAtFirstSight: false });
    const byMarker = await engineOn([0, 1, 2], { ...MARKER, quarantineAtFirstSight: false });
    await masters().restart(0, { keepData: true }); // SIGKILL, then back from the snapshot
    await Promise.all([clients[0]!, byInfo.clients[0]!, byMarker.clients[0]!].map(untilReady));
    expect(await clients[0]!.exists('redlock:snapshot')).toBe(0);
    expect(await clients[0]!.get('redlock-fence:')).toMatch(/^old-0 /);

    // INFO sees another run_id: master 0's vote waits out the window, so {0, 2} cannot grant.
    expect(await byInfo.redlock.tryAcquire('snapshot', 30_000)).toBeNull();
    expect(byInfo.notices.map((notice) => notice.reason)).toEqual(['run_id changed']);
    // The marker is the one it saw before, a minute old: master 0 votes at once, and a second
    // holder is let in beside A.
    const second = await byMarker.redlock.tryAcquire('snapshot', 30_000);
    expect(second).not.toBeNull();
    expect(held.remainingMs()).toBeGreaterThan(0);
    expect(byMarker.notices).toEqual([]);
  });

  it('is refused with voters that fail over (a Sentinel group, a Redis Cluster), and for any other value', () => {
    expect(() => new Redlock([lockClient(masters().urls()[0]!)], { identifyBy: 'run_id' as never })).toThrow(/identifyBy.*'info' or 'marker'/);
    // Never connected: the engine refuses it before it asks anything.
    const sentinelManaged = new Redis({ sentinels: [{ host: '127.0.0.1', port: 1 }], name: 'mymaster', lazyConnect: true });
    opened.push(sentinelManaged);
    expect(() => new Redlock([lockClient(masters().urls()[0]!), sentinelManaged], MARKER)).toThrow(/clients\[1\] fails over to replicas/);
  });
});
