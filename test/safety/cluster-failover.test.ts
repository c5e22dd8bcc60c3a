import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Redlock } from '../../lib/core/index.js';
import { keySlot } from '../../lib/core/base/key-slot.js';
import { freePort } from '../support/free-port.js';
import { connectMasters, disconnectAll, LOCK_CLIENT_OPTIONS, untilReady } from '../support/masters.js';
import { RedisCluster } from '../support/redis-cluster.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { clusterLockClient } from './support/cluster-client.js';
import { now, nsFromMs, type HistoryEvent } from './support/history.js';
import { LocalHolder } from './support/local-holder.js';
import { failures, runFor, SafetyRun, spread, timeoutFor, type ScenarioSpec } from './support/safety-run.js';
import { KINDS, loopWorker, range, tally, type Kind } from './support/scenario-kit.js';
import { anotherEpisode, CONTROL_EXTRA_MS, MAX_SHORT_HOLDS, takeoverViolations, WholeHold } from './support/whole-hold.js';

// Redis Cluster shard failovers to replicas that missed live locks (spec section 5, the restart
// quarantine, for a shard master replaced behind a slot: lib/core/voters/shard-quarantine.ts).
//
// Three voters: one Redis Cluster (3 shards, one replica each) and two standalone masters.
// Worker processes lock three resources, one in each shard, through all three voters all along,
// one round every 20-70 ms. Each episode is made deterministic as in the Sentinel scenario,
// turning to the next shard each time: holder A (in this process) holds exactly two voters, the
// cluster and one standalone (its client for the other reaches nobody); the replica of the
// shard that owns A's resource is cut off before A acquires (its master asks for a password the
// replica does not have), so it lacks A's key; the shard master is then SIGKILLed and the
// replica promoted, either by the cluster itself (the masters agree the old one is down) or at
// once by CLUSTER FAILOVER TAKEOVER. The promoted replica and the standalone A does not hold
// know nothing of A: a majority. The promoted replica has been up for longer than the
// quarantine window (it was a replica all along), so only the change of the slot's owner
// (its run_id) can tell the workers not to count it: with the quarantine on they must, and the
// test checks that they noticed it while A held the lock. The control runs the same with the
// quarantine off, and the checker must catch it. After each episode the old master comes back
// (its data gone, its cluster config kept) and rejoins as the new master's replica, promotable
// three episodes later. For a semaphore and a read-write lock A takes the whole resource, as in
// the Sentinel scenario (support/whole-hold.ts).

/**
 * A's lock outlasts a failover (an automatic one waits for the cluster node timeout) with
 * seconds to spare; the workers' own locks are short, so that a worker's stale key on the
 * promoted replica expires well within A's lock: without the quarantine, nothing but the
 * quarantine stands between the workers and A's lock.
 */
const HOLDER_TTL = 8_000;
const WORKER_TTL = 2_000;
const SHORT_MS = 5_000;
/** A writes under the lock only with this much validity left. */
const WRITE_MARGIN_MS = HOLDER_TTL / 4;
/** What a shard master asks of new connections while its replica is cut off; nobody has it. */
const HOLD_PASSWORD = 'replication-held';
/** Every wait on the servers is bounded by this. */
const WAIT_MS = 30_000;

/** A SafetyRun that also counts successful acquisitions per resource (three resources here). */
class ClusterRun extends SafetyRun {
  readonly #holds = new Map<string, { t: bigint; proc: string; fenced: boolean }[]>();

  override noteHolds(events: readonly HistoryEvent[]): void {
    super.noteHolds(events);
    for (const e of events) {
      if (e.op !== 'acquire' || e.phase !== 'ok' || e.resource === undefined) continue;
      const list = this.#holds.get(e.resource) ?? [];
      list.push({ t: e.t, proc: e.proc, fenced: e.fence !== undefined });
      this.#holds.set(e.resource, list);
    }
  }

  /** Successful acquisitions of `resource` at or after `since` by the processes `accepts` takes (see holdsSince). */
  holdsOn(resource: string, since: bigint, accepts: (proc: string) => boolean = () => true, fencedOnly = false): number {
    const list = this.#holds.get(resource) ?? [];
    const horizon = since - 10_000_000_000n;
    let count = 0;
    for (let i = list.length - 1; i >= 0; i--) {
      const hold = list[i]!;
      if (hold.t < horizon) break;
      if (hold.t >= since && accepts(hold.proc) && (hold.fenced || !fencedOnly)) count++;
    }
    return count;
  }

  /** How long after `since` the first such acquisition of `resource` came, in ms, if one did. */
  firstHoldOn(resource: string, since: bigint, accepts: (proc: string) => boolean): number | undefined {
    let first: bigint | undefined;
    for (const hold of this.#holds.get(resource) ?? []) if (hold.t >= since && accepts(hold.proc) && (first === undefined || hold.t < first)) first = hold.t;
    return first === undefined ? undefined : Number(first - since) / 1e6;
  }
}

// One cluster and one pair of standalone masters for both scenarios of the file (starting a
// cluster is the slow part); each scenario finds the shards as the last one left them.
let cluster: RedisCluster | undefined;
let fleet: RedisFleet | undefined;
let run: SafetyRun | undefined;
/** Per cluster node (fleet index), a plain client to that server alone. */
const admin: Redis[] = [];
/** One resource per shard. */
let resources: string[] = [];
const opened: Redis[] = [];

beforeAll(async () => {
  [cluster, fleet] = await Promise.all([RedisCluster.start({ masters: 3, replicasPerMaster: 1 }), RedisFleet.start(2)]);
  for (const index of range(cluster.fleet.nodes.length)) await connectAdmin(index);
  resources = await resourcePerShard();
}, 120_000);

afterEach(async () => {
  await run?.dispose();
  run = undefined;
  disconnectAll(opened.splice(0));
});

afterAll(async () => {
  disconnectAll(admin.splice(0));
  await Promise.all([cluster?.stopAll(), fleet?.stopAll()]);
});

/** An ioredis client for an address nobody listens on: every command fails at once. */
async function deadMaster(): Promise<Redis> {
  const client = new Redis(`redis://127.0.0.1:${await freePort()}`, { ...LOCK_CLIENT_OPTIONS, lazyConnect: true });
  client.on('error', () => {});
  opened.push(client);
  return client;
}

/** A fresh plain client to cluster node `index` (after a restart: no waiting out a reconnection back-off). */
async function connectAdmin(index: number): Promise<void> {
  admin[index]?.disconnect();
  const client = new Redis(cluster!.fleet.nodes[index]!.url, { maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  admin[index] = client;
  await untilReady(client);
  await client.call('READONLY'); // a replica answers reads of its master's slots (does it have the key?)
  // A replica's full sync starts at once, not after the 5 s a master waits for more replicas by default.
  await client.config('SET', 'repl-diskless-sync-delay', '0');
}

/** Polls `check` (errors count as not yet) until it holds; fails after WAIT_MS. */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = performance.now() + WAIT_MS;
  while (!(await check().catch(() => false))) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

const field = (info: string, name: string): string | undefined => new RegExp(`^${name}:(.*)$`, 'm').exec(info)?.[1]?.trim();

async function server(index: number): Promise<{ runId: string; uptimeMs: number }> {
  const info = await admin[index]!.info('server');
  return { runId: field(info, 'run_id')!, uptimeMs: Number(field(info, 'uptime_in_seconds')) * 1000 };
}

/** Node `replica` replicates node `master` and is in sync: it would get whatever the master writes. */
async function replicating(replica: number, master: number): Promise<boolean> {
  const info = await admin[replica]!.info('replication');
  return (
    field(info, 'role') === 'slave' &&
    field(info, 'master_port') === String(cluster!.fleet.nodes[master]!.port) &&
    field(info, 'master_link_status') === 'up' &&
    field(info, 'master_sync_in_progress') === '0'
  );
}

/**
 * Cuts `replica` off its shard master: the master asks new connections for a password and drops
 * its replicas; the replica cannot reconnect. The connections already open (the workers', A's,
 * the test's) stay as they are, and the cluster bus does not use passwords: nobody else notices.
 */
async function cutOff(master: number, replica: number): Promise<void> {
  await admin[master]!.config('SET', 'requirepass', HOLD_PASSWORD);
  await admin[master]!.call('CLIENT', 'KILL', 'TYPE', 'replica');
  await until(async () => field(await admin[replica]!.info('replication'), 'master_link_status') === 'down', `node ${replica} to lose its master`);
}

/** Undoes `cutOff`: the master takes connections without a password again, and the replica catches up. */
async function reconnect(master: number, replica: number): Promise<void> {
  await admin[master]!.config('SET', 'requirepass', '');
  await until(() => replicating(replica, master), `node ${replica} to be back in sync with node ${master}`);
}

/** One resource per shard: a name whose hash slot falls in each slot range, in slot order. */
async function resourcePerShard(): Promise<string[]> {
  const ranges = ((await admin[0]!.call('CLUSTER', 'SLOTS')) as [number, number][]).map(([from, to]) => [from, to] as const);
  ranges.sort((a, b) => a[0] - b[0]);
  return ranges.map(([from, to]) => {
    for (let i = 0; ; i++) {
      const slot = keySlot(`cf-${i}`);
      if (slot >= from && slot <= to) return `cf-${i}`;
    }
  });
}

async function failoverScenario(quarantine: boolean, kind: Kind): Promise<void> {
  const shards = cluster!;
  const standalone = fleet!;
  const voters = [{ cluster: shards.startupNodes() }, ...standalone.urls()];

  const spec: ScenarioSpec = quarantine
    ? {
        id: `cluster-failover${kind.id}`,
        title: `${kind.title}Redis Cluster shard failover to a replica that missed a live lock (quarantine on)`,
        expected: 'safe',
        method:
          '3 voters: a Redis Cluster (3 shards, 1 replica each, cluster-node-timeout 1 s) and 2 standalone masters. Holder A ' +
          'holds exactly the cluster and one standalone; the replica of the shard owning A\'s resource is cut off before A ' +
          'acquires, then the shard master is SIGKILLed and the replica promoted (by the cluster, or at once by CLUSTER ' +
          'FAILOVER TAKEOVER), each episode on the next shard, while 2 processes x 3 workers keep trying one resource per ' +
          'shard through all 3 voters (ioredis Cluster client as docs/production.md configures it), one tryAcquire every 20-70 ms ' +
          '(ttl 2 s; A\'s ttl 8 s, so the workers\' quarantine is set to 8 s; default fences). Every promoted replica had ' +
          'been up for longer than the window: only its new run_id for the slot can quarantine it. The old master then ' +
          'rejoins, empty, as the new master\'s replica.' +
          (kind.name === 'semaphore' ? ' A holds both permits; the workers take permits.' : kind.name === 'read-write' ? ' A is a writer; the workers read or write.' : ''),
      }
    : {
        id: `cluster-control${kind.id}`,
        title: `${kind.title}The same Redis Cluster shard failovers with restart quarantine off (control)`,
        expected: 'unsafe',
        method: 'As above, with restartQuarantineMs: false in the workers: the promoted replica votes at once.',
      };
  const scenario = new ClusterRun(spec);
  run = scenario;
  // The quarantine must cover the longest lock any process takes (A's), not only the workers' own.
  const engine = { restartQuarantineMs: quarantine ? HOLDER_TTL : (false as const) };
  await Promise.all(
    range(2).map((p) =>
      scenario.spawn(
        loopWorker(`w${p}`, [], { voters, workers: 3, resources, ttlMs: [WORKER_TTL], engine, single: true, separateEngines: true, pauseMs: 30, shared: kind.shared }),
      ),
    ),
  );

  // The workers make progress on every shard first: the servers have aged past their quarantine window.
  const warmedUp = await scenario.until(() => resources.every((resource) => scenario.holdsOn(resource, scenario.startedAt) >= 3), 30_000);
  scenario.expect('the workers hold every resource before the first episode', warmedUp);

  let episodes = 0;
  let shortHolds = 0;
  let takeovers = 0;
  let fencedTakeovers = 0;
  let lateWritesRejected = 0;
  let keyOnMasterOnly = 0;
  let promotedWithoutKey = 0;
  let promotedOld = 0;
  let noticedInTime = 0;
  const promotedAges: number[] = [];
  const failoverMs: number[] = [];
  /** From the kill to the first notice of the new owner (quarantine on), or to the takeover. */
  const noticeMs: number[] = [];
  const takeoverMs: number[] = [];
  const ways: string[] = [];
  // The shard whose replica has been up longest goes first (the other scenario may have just
  // restarted the others' old masters as replicas).
  const ages = await Promise.all(resources.map(async (resource) => (await server(await shards.replicaOf(await shards.masterOf(`{${resource}}`)))).uptimeMs));
  const firstShard = ages.indexOf(Math.max(...ages));
  const endAt = performance.now() + runFor(SHORT_MS);
  do {
    const resource = resources[(firstShard + episodes) % 3]!;
    const names = { lock: `redlock:{${resource}}`, holders: `redlock-holders:{${resource}}` };
    episodes++;
    const master = await shards.masterOf(`{${resource}}`);
    const replica = await shards.replicaOf(master);
    await until(() => replicating(replica, master), `node ${replica} to be in sync with node ${master}`);
    if (quarantine) {
      // A replica younger than the window would be quarantined for its age alone: wait that out,
      // so that only the change of owner can keep it from voting (normally no wait at all).
      await until(async () => (await server(replica)).uptimeMs > HOLDER_TTL, `node ${replica} to be older than the quarantine window`);
    }

    // A reaches the cluster and one standalone master; its client for the other reaches nobody.
    const unreached = 1 + Math.floor(Math.random() * 2);
    const aCluster = clusterLockClient({ cluster: shards.startupNodes() });
    opened.push(aCluster);
    const [reached] = await connectMasters([standalone.urls()[unreached === 1 ? 1 : 0]!]);
    opened.push(reached!);
    await untilReady(aCluster);
    await aCluster.exists(names.lock); // A's connection to the shard master, open before it asks for a password
    const dead = await deadMaster();
    const aEngine = new Redlock([aCluster, unreached === 1 ? dead : reached!, unreached === 2 ? dead : reached!], {
      restartQuarantineMs: false, // A only ever acquires before the failover of its episode
      logger: { warn: () => {} },
    });
    const a = new LocalHolder(scenario, aEngine, 'A');
    const dir = String(((await admin[master]!.config('GET', 'dir')) as string[])[1]);

    await cutOff(master, replica); // the replica misses everything from here on
    const hold = await WholeHold.take(a, kind, resource, HOLDER_TTL, 30_000);
    if (hold.isShort() && shortHolds++ < MAX_SHORT_HOLDS) {
      episodes--;
      await hold.end(aEngine, opened);
      await reconnect(master, replica);
      continue;
    }
    const aDeadline = now() + nsFromMs(hold.remainingMs());
    const read = hold.read();
    if ((await hold.isOn(admin[master]!, names)) && (await hold.isNotOn(admin[replica]!, names))) keyOnMasterOnly++;

    const automatic = Math.random() < 0.5;
    ways.push(automatic ? 'automatic failover' : 'CLUSTER FAILOVER TAKEOVER');
    const killedAt = now();
    const failoverStarted = performance.now();
    await shards.fleet.kill(master);
    if (!automatic) await admin[replica]!.call('CLUSTER', 'FAILOVER', 'TAKEOVER');
    await shards.untilPromoted(replica);
    failoverMs.push(performance.now() - failoverStarted);
    const promoted = await server(replica);
    promotedAges.push(promoted.uptimeMs);
    if (promoted.uptimeMs > HOLDER_TTL) promotedOld++;
    if (await hold.isNotOn(admin[replica]!, names)) promotedWithoutKey++;
    scenario.fault(`cluster shard of ${resource} (A holds the cluster): master SIGKILLed, replica that missed A's key promoted (${ways.at(-1)})`, killedAt);

    // Does a worker get the lock while A still holds it? Wait as long as A's lock can say.
    // (Nobody can from the kill to the promotion: A holds the other standalone master.)
    const taken = await scenario.until(
      () => scenario.holdsOn(resource, killedAt, (proc) => proc !== 'A') > 0,
      Math.max(0, hold.remainingMs() - WRITE_MARGIN_MS - 50),
    );
    // A write is refused only after a holder with a fence has been to the store.
    const fencedTakeover = taken && scenario.holdsOn(resource, killedAt, (proc) => proc !== 'A', true) > 0;
    if (fencedTakeover) fencedTakeovers++;
    if (taken) {
      takeovers++;
      takeoverMs.push(scenario.firstHoldOn(resource, killedAt, (proc) => proc !== 'A')!);
      // A goes on as if nothing happened (it cannot know), for a little while.
      await sleep(Math.min(100, Math.max(0, hold.remainingMs() - WRITE_MARGIN_MS - 10)));
    }
    const written = hold.write(read, WRITE_MARGIN_MS);
    if (fencedTakeover && written && !written.accepted) lateWritesRejected++;
    if (quarantine) {
      // The workers heard from the promoted replica while A held the lock, and judged it by its run_id.
      const shard = `(shard ${promoted.runId.slice(0, 12)})`;
      let first: bigint | undefined;
      const noticed = () => {
        scenario.history.count((e) => {
          const notice = e.op === 'quarantine' && e.t >= killedAt && e.t < aDeadline && !!e.note?.includes(shard) && e.note.includes('run_id changed');
          if (notice && (first === undefined || e.t < first)) first = e.t;
          return notice;
        });
        return first !== undefined;
      };
      if (await scenario.until(noticed, Math.max(0, Number(aDeadline - now()) / 1e6))) {
        noticedInTime++;
        noticeMs.push(Number(first! - killedAt) / 1e6);
      }
    }
    await hold.end(aEngine, opened);

    // The old master comes back with its cluster config (nodes.conf) but no data (the RDB file a
    // full sync as a replica once left), and rejoins as the new master's replica.
    await rm(join(dir, 'dump.rdb'), { force: true });
    await shards.fleet.start(master, { keepData: true });
    await connectAdmin(master);
    await until(() => replicating(master, replica), `node ${master} to rejoin as node ${replica}'s replica`);
    await shards.untilHealthy();
    await sleep(300); // the workers run undisturbed for a while between episodes
  } while (anotherEpisode({ endAt, episodes, quarantine, takeovers }));

  scenario.expect(`A's key was on the shard master and not on its cut-off replica (${keyOnMasterOnly}/${episodes})`, keyOnMasterOnly === episodes);
  scenario.expect(
    `every failover promoted a replica that lacked A's key (${promotedWithoutKey}/${episodes}): ${tally(ways)}; failover took ${spread(failoverMs)}`,
    promotedWithoutKey === episodes,
  );
  if (quarantine) {
    scenario.expect(
      `every promoted replica had been up for longer than the window (${promotedOld}/${episodes}; youngest ${Math.min(...promotedAges) / 1000} s)`,
      promotedOld === episodes,
    );
    scenario.expect(
      `the workers heard from every promoted replica while A held the lock and quarantined it as a new owner of the slot ` +
        `(${noticedInTime}/${episodes}; first notice after the kill: ${spread(noticeMs)})`,
      noticedInTime === episodes,
    );
    scenario.expect(
      `no worker got the lock while A held it (${takeovers}/${episodes} episodes${takeovers ? `; after the kill: ${spread(takeoverMs)}` : ''})`,
      takeovers === 0,
    );
  } else {
    scenario.expect(`a worker got the lock while A held it (${takeovers}/${episodes} episodes; after the kill: ${spread(takeoverMs)})`, takeovers > 0);
    // Only the lock's takers all write: a reader that took over leaves the store alone, and the
    // checker's fence rules judge A's write then.
    if (kind.name === 'lock') {
      scenario.expect(
        `the fenced store refused A's write after every takeover by a fenced lock (${lateWritesRejected}/${fencedTakeovers})`,
        lateWritesRejected === fencedTakeovers,
      );
    }
  }
  const result = await scenario.finish();
  expect(failures(result)).toBe('');
  if (!quarantine) expect(takeoverViolations(kind).reduce((n, violation) => n + result.counts[violation], 0)).toBeGreaterThan(0);
}

describe('Redis Cluster shard failovers to replicas that missed a live lock', () => {
  // The controls first: they need no server older than the quarantine window, and while they
  // run the servers age past it, which the quarantined scenarios need before their workers can lock.
  for (const kind of KINDS) {
    it(`${kind.title}are caught by the checker as a double grant with the quarantine off (control)`, () => failoverScenario(false, kind), timeoutFor(SHORT_MS) + CONTROL_EXTRA_MS);
  }
  for (const kind of KINDS) {
    it(`${kind.title}never let a second holder in while the restart quarantine is on`, () => failoverScenario(true, kind), timeoutFor(SHORT_MS));
  }
});
