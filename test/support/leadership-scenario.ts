import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { forkApp, type AppProcess } from './app-process.js';
import { RedisFleet } from './redis-fleet.js';
import { leadershipViolations, takeoverMs } from './leadership-history.js';
import type { LeaderAppConfig, LeaderEvent } from '../nest/support/leader-app.js';

// Three replica processes of test/nest/support/leader-app.ts campaigning on fresh masters, a
// fault, a takeover, again: what test/nest/leadership-failover.test.ts checks and what
// bench/leadership-takeover.ts times.

const APP = fileURLToPath(new URL('../nest/support/leader-app.ts', import.meta.url));

export const LEASE_MS = 1_000;

interface Replica extends AppProcess {
  readonly name: string;
}

function startReplica(fleets: Fleets, name: string, events: LeaderEvent[], options: { quarantine: boolean; manual?: boolean }): Replica {
  const config: LeaderAppConfig = {
    nodes: fleets.masters.urls(),
    store: fleets.store.urls()[0]!,
    replica: name,
    leaseMs: LEASE_MS,
    quarantine: options.quarantine,
    writeEveryMs: 20,
    ...(options.manual ? { manual: true } : {}),
  };
  return { name, ...forkApp<LeaderEvent>(APP, config, `replica ${name}`, (event) => events.push(event)) };
}

/** Polls the events (they arrive over IPC) until `found` finds one; rejects after `timeoutMs`. */
async function until<T>(what: string, found: () => T | undefined, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = found();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** The latest term that has written, and its replica. */
function currentLeader(events: readonly LeaderEvent[], above = 0): { replica: string; term: number } | undefined {
  let best: { replica: string; term: number } | undefined;
  for (const event of events) if (event.kind === 'write' && event.term > above && (!best || event.term > best.term)) best = event;
  return best && { replica: best.replica, term: best.term };
}

export type Fault = 'kill' | 'stop' | 'resign' | 'masters';

interface Fleets {
  masters: RedisFleet;
  store: RedisFleet;
}

export interface ScenarioResult {
  faults: number;
  terms: number;
  takeoverMs: number[];
  violations: string[];
  /** A stalled leader's writes after it resumed: how many it attempted, and how many the fence accepted. */
  staleWrites?: { attempted: number; accepted: number };
}

/**
 * Three replicas campaign; the fault hits the leader (or 2 of 3 masters), a standby takes over,
 * the faulted replica is replaced, again until `seconds` are up (at least once).
 */
export async function leadershipScenario(fault: Fault, quarantine: boolean, seconds: number): Promise<ScenarioResult> {
  const events: LeaderEvent[] = [];
  const replicas = new Map<string, Replica>();
  let serial = 0;
  const spawn = (manual = false) => {
    const replica = startReplica(fleets, `r${++serial}`, events, { quarantine, manual });
    replicas.set(replica.name, replica);
    return replica;
  };
  const result: ScenarioResult = { faults: 0, terms: 0, takeoverMs: [], violations: [] };
  const stale = { attempted: 0, accepted: 0 };
  const fleets: Fleets = { masters: await RedisFleet.start(3), store: await RedisFleet.start(1) };
  const { masters } = fleets;
  const first = [spawn(), spawn(), spawn()];
  try {
    await Promise.all(first.map((replica) => replica.ready));
    const endAt = Date.now() + seconds * 1000;
    do {
      const leader = await until('a leader', () => currentLeader(events, 0));
      const replica = replicas.get(leader.replica)!;
      const since = Date.now();
      if (fault === 'kill') {
        replica.child.kill('SIGKILL');
      } else if (fault === 'stop') {
        replica.child.kill('SIGSTOP');
      } else if (fault === 'resign') {
        replica.child.send('stop');
      } else {
        // A candidate that campaigns right after 2 of 3 masters restart empty: with the
        // quarantine off (the control) it can win while the leader still relies on its lease.
        const candidate = spawn(true);
        await candidate.ready;
        await Promise.all([masters.restart(1), masters.restart(2)]);
        candidate.child.send('campaign');
      }
      result.faults++;
      await until('the next term', () => currentLeader(events, leader.term));
      const took = takeoverMs(events, since, leader.term);
      if (took !== undefined) result.takeoverMs.push(took);
      if (fault === 'stop') {
        // Past its lease, then resumed: it must find its leadership lost before it writes again.
        await sleep(LEASE_MS);
        const resumedAt = Date.now();
        replica.child.kill('SIGCONT');
        await until('the stalled leader to learn it lost', () =>
          events.find((event) => event.kind === 'ended' && event.term === leader.term && event.replica === leader.replica),
        );
        const after = events.filter((event) => event.kind === 'write' && event.term === leader.term && event.at >= resumedAt);
        stale.attempted += after.length;
        stale.accepted += after.filter((event) => event.kind === 'write' && event.accepted).length;
      }
      if (fault === 'masters' && replicas.size > 4) {
        // Each restart brought a candidate: the oldest standbys make way, so a long run keeps four.
        const current = currentLeader(events, 0)?.replica;
        for (const old of [...replicas.values()].filter((r) => r.name !== current).slice(0, replicas.size - 4)) {
          old.child.kill('SIGKILL');
          await old.exited;
          replicas.delete(old.name);
        }
      }
      if (fault !== 'masters') {
        // The faulted replica is gone (or stale): a fresh one takes its place among the standbys.
        replica.child.kill('SIGKILL');
        await replica.exited;
        replicas.delete(replica.name);
        await spawn().ready;
      }
    } while (Date.now() < endAt);
    // A little more history after the last takeover, for the checker.
    await sleep(300);
  } finally {
    for (const replica of replicas.values()) replica.child.send('stop');
    await Promise.race([Promise.all([...replicas.values()].map((replica) => replica.exited)), sleep(5_000)]);
    for (const replica of replicas.values()) replica.child.kill('SIGKILL');
    await masters.stopAll();
    await fleets.store.stopAll();
  }
  result.terms = new Set(events.filter((event) => event.kind === 'elected').map((event) => event.term)).size;
  result.violations = leadershipViolations(events);
  if (fault === 'stop') result.staleWrites = stale;
  return result;
}

