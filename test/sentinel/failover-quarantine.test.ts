import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockHeldError, QuorumUnreachableError, Redlock, type Lock, type QuarantineNotice } from '../../lib/index.js';
import { freePort } from '../support/free-port.js';
import { connectMasters, disconnectAll, FRESH_FLEET, LOCK_CLIENT_OPTIONS, untilReady, watchCalls } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { SentinelGroup, sentinelClient, untilServes } from '../support/sentinel-group.js';

// Voters: one Sentinel-managed master (a master, one replica, one Sentinel with quorum 1: the
// failovers here are forced, so one Sentinel is enough; production runs three) and two plain
// masters. Holder A holds exactly the Sentinel voter and plain master 0, a bare majority. The
// Sentinel voter's replica misses A's key (its replication link is held), then its master
// crashes and Sentinel promotes that replica: plain master 1 and the promoted replica, which
// both know nothing of A, are a majority. The restart quarantine sees the new run_id behind the
// voter's name and does not count it; the same engine without the quarantine grants A's lock
// to a second holder.

/** A's lock: long enough to outlast the failover on a loaded machine. */
const TTL = 8_000;
const RESOURCE = 'split';

let group: SentinelGroup;
let plain: RedisFleet;
const opened: Redis[] = [];
const silent = { warn: () => {} };

beforeAll(async () => {
  [group, plain] = await Promise.all([SentinelGroup.start({ name: 'voter-s' }), RedisFleet.start(2)]);
});

afterEach(() => {
  disconnectAll(opened.splice(0));
});

afterAll(async () => {
  await Promise.all([group?.stopAll(), plain?.stopAll()]);
});

async function voters(): Promise<Redis[]> {
  const viaSentinel = sentinelClient(group);
  opened.push(viaSentinel);
  await untilReady(viaSentinel);
  const direct = await connectMasters(plain.urls());
  opened.push(...direct);
  return [viaSentinel, ...direct];
}

async function engine(options: ConstructorParameters<typeof Redlock>[1]): Promise<{ redlock: Redlock; clients: Redis[] }> {
  const clients = await voters();
  // A generous round deadline: on a loaded machine a slow reply must not pass for a refusal.
  const redlock = new Redlock(clients, { logger: silent, nodeTimeoutMs: 2_000, ...options });
  // Identified before the failover: each engine knows the run_id of the master it will lose.
  await redlock.verifyMasters();
  return { redlock, clients };
}

/** An ioredis client for an address nobody listens on: every command fails at once. */
async function deadMaster(): Promise<Redis> {
  const client = new Redis(`redis://127.0.0.1:${await freePort()}`, { ...LOCK_CLIENT_OPTIONS, lazyConnect: true });
  client.on('error', () => {});
  opened.push(client);
  return client;
}

describe('a Sentinel failover to a replica that missed a live lock', () => {
  it('names the voter after its Sentinel group, the same before and after the failover', async () => {
    const { redlock } = await engine(FRESH_FLEET);
    expect(redlock.nodes[0]!.name).toBe(`sentinel:voter-s@127.0.0.1:${group.sentinelPorts()[0]}`);
  });

  it('is quarantined by its new run_id; without the quarantine a second holder gets the lock (control)', async () => {
    // A: the Sentinel voter and plain master 0; its third client reaches nobody.
    const [viaSentinel, first] = await voters();
    const a = new Redlock([viaSentinel!, first!, await deadMaster()], { ...FRESH_FLEET, logger: silent, nodeTimeoutMs: 2_000 });
    await a.verifyMasters();
    const guarded = await engine({ restartQuarantineMs: TTL });
    const unguarded = await engine(FRESH_FLEET);
    const notices: QuarantineNotice[] = [];
    guarded.redlock.on('quarantine', (notice: QuarantineNotice) => notices.push(notice));
    // The servers have just started: wait until the guarded engine counts them (they are older than its window).
    await expect.poll(async () => (await guarded.redlock.checkMasters()).available, { timeout: TTL + 10_000, interval: 200 }).toBe(true);

    const oldMaster = group.masterIndex;
    const [replica] = group.replicaIndexes();
    await group.holdReplication(); // from here on the replica misses every write of its master
    const held: Lock = await a.acquire(RESOURCE, TTL);
    expect(await group.direct(oldMaster).exists(`redlock:${RESOURCE}`)).toBe(1);
    expect(await group.direct(replica!).exists(`redlock:${RESOURCE}`)).toBe(0);
    // While A's master stands, both contenders are refused (it and plain master 0 hold A's key).
    expect(await guarded.redlock.tryAcquire(RESOURCE, TTL)).toBeNull();
    expect(await unguarded.redlock.tryAcquire(RESOURCE, TTL)).toBeNull();

    await group.kill(oldMaster);
    const promoted = await group.failover();
    expect(promoted).toBe(replica);
    expect(await group.direct(promoted).exists(`redlock:${RESOURCE}`)).toBe(0); // A's key is gone with the old master
    const newPort = group.server(promoted).port;
    await Promise.all([guarded.clients[0]!, unguarded.clients[0]!].map((client) => untilServes(client, newPort)));

    const guardedTry = await guarded.redlock.tryAcquire(RESOURCE, TTL).catch((error: unknown) => error);
    expect(guardedTry === null || guardedTry instanceof QuorumUnreachableError || guardedTry instanceof LockHeldError).toBe(true);
    await expect.poll(() => notices.map((n) => `${n.node} ${n.reason}`)).toContain(`${guarded.redlock.nodes[0]!.name} run_id changed`);
    expect(held.remainingMs()).toBeGreaterThan(0);

    // The control: the promoted replica and plain master 1 grant A's lock to a second holder.
    const second = await unguarded.redlock.tryAcquire(RESOURCE, TTL);
    expect(second).not.toBeNull();
    expect(held.remainingMs()).toBeGreaterThan(0);
    await second!.release();
    await held.release();
    a.close();
    await group.restartAsReplica(oldMaster);
  }, 60_000);

  it('does not count a vote sent to the old master and answered by the promoted one after the reconnect', async () => {
    const [viaSentinel, first] = await voters();
    const a = new Redlock([viaSentinel!, first!, await deadMaster()], { ...FRESH_FLEET, logger: silent, nodeTimeoutMs: 2_000 });
    await a.verifyMasters();
    // B's round waits long for its masters (longer than the failover), and its Sentinel client
    // keeps a request through reconnections (ioredis's default, 20 retries): a take sent to the
    // old master is sent again, by ioredis, to whichever server it reaches next.
    const keeper = sentinelClient(group, { maxRetriesPerRequest: 20 });
    opened.push(keeper);
    await untilReady(keeper);
    const direct = await connectMasters(plain.urls());
    opened.push(...direct);
    const b = new Redlock([keeper, ...direct], { logger: silent, restartQuarantineMs: TTL, nodeTimeoutMs: 20_000 });
    await b.verifyMasters();
    // Every voter counts, the Sentinel one too: its master, promoted by the test above, is quarantined at first sight.
    await expect.poll(async () => (await b.checkMasters()).masters.every((master) => master.votes), { timeout: TTL + 10_000, interval: 200 }).toBe(true);

    const oldMaster = group.masterIndex;
    await group.holdReplication();
    const held = await a.acquire('in-flight', TTL);
    group.pause(oldMaster); // B's take to it stays unanswered
    // Wrapped: resolving with the reply itself would wait for the reply.
    const sent = new Promise<{ reply: Promise<unknown> }>((resolve) => watchCalls(keeper, 'set', (_args, reply) => resolve({ reply })));
    const attempt = b.tryAcquire('in-flight', TTL).catch((error: unknown) => error);
    const { reply } = await sent;
    await group.kill(oldMaster);
    const promoted = await group.failover();
    const result = await attempt;
    // The take sent to the old master was answered: ioredis sent it again to the promoted server,
    // which granted it (A's key is not there)...
    expect(await reply).toBe('OK');
    // ...but that reply crossed a reconnection: it is no vote, and B holds nothing.
    expect(result === null || result instanceof QuorumUnreachableError || result instanceof LockHeldError).toBe(true);
    expect(held.remainingMs()).toBeGreaterThan(0);
    await held.release();
    a.close();
    await group.restartAsReplica(oldMaster);
  }, 60_000);
});

describe('a Sentinel failover that happened before the engine first reached the voter', () => {
  // The promoted server's uptime says nothing of when it took over: an engine that first meets
  // it already promoted (a deployment right after a failover) must not count it for the window,
  // even though it has been up for longer than that.
  it('does not count the promoted master for the window; without the check a new engine gets a live lock', async () => {
    const [viaSentinel, first] = await voters();
    const a = new Redlock([viaSentinel!, first!, await deadMaster()], { ...FRESH_FLEET, logger: silent, nodeTimeoutMs: 2_000 });
    await a.verifyMasters();
    await group.holdReplication();
    const held = await a.acquire(RESOURCE, TTL);
    const oldMaster = group.masterIndex;
    const [replica] = group.replicaIndexes();
    await group.kill(oldMaster);
    const promoted = await group.failover();
    expect(promoted).toBe(replica);
    expect(await group.direct(promoted).exists(`redlock:${RESOURCE}`)).toBe(0);
    // Older than the window, so that its uptime alone would let it vote at once.
    const windowMs = 5_000;
    const uptime = async () => Number(/uptime_in_seconds:(\d+)/.exec(await group.direct(promoted).info('server'))?.[1]);
    await expect.poll(uptime, { timeout: 20_000, interval: 200 }).toBeGreaterThan(windowMs / 1000 + 1);
    const replication = await group.direct(promoted).info('replication');
    expect(replication).toMatch(/^second_repl_offset:\d+/m);

    // Created after the failover: it never knew the old master.
    const late = await engine({ restartQuarantineMs: windowMs });
    const notices: QuarantineNotice[] = [];
    late.redlock.on('quarantine', (notice: QuarantineNotice) => notices.push(notice));
    const attempt = await late.redlock.tryAcquire(RESOURCE, TTL).catch((error: unknown) => error);
    expect(held.remainingMs()).toBeGreaterThan(0);
    expect(attempt === null || attempt instanceof QuorumUnreachableError || attempt instanceof LockHeldError).toBe(true);
    const status = await late.redlock.checkMasters();
    expect(status.masters[0]!.quarantinedForMs).toBeGreaterThan(0);
    expect(notices.map((n) => `${n.node} ${n.reason}`)).toContain(`${late.redlock.nodes[0]!.name} promoted replica`);

    await held.release();
    a.close();
    late.redlock.close();
    await group.restartAsReplica(oldMaster);
  }, 60_000);
});
