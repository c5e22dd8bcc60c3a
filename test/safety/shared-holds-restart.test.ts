import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redlock, type Lock, type QuarantineNotice, type TryAcquireOptions } from '../../lib/core/index.js';
import { freePort } from '../support/free-port.js';
import { connectMasters, disconnectAll, FRESH_FLEET, LOCK_CLIENT_OPTIONS, untilReady } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { checkHistory, summarize } from './support/checker.js';
import { History, now, nsFromMs } from './support/history.js';

// Restart one master of a reader's (or a permit holder's) bare majority, empty, at once: the
// fault that breaks a lock without the restart quarantine (spec section 5), here for a
// read-write lock and a semaphore, with the history checker judging the holds.
//
// Holder A takes a read lock (or a permit of limit 2) while masters 3 and 4 are out of its reach,
// so it holds exactly {0, 1, 2}; for the semaphore, B holds the other permit on all five. Master 0
// is restarted empty. Then three engines (separate connections: three processes as far as the
// masters can tell) try for a write lock (or a permit) one round at a time. With the quarantine
// on, master 0 does not vote until every hold it may have forgotten has expired: the checker
// finds nothing. The control, quarantine off, lets a writer in beside A (or a third permit
// holder in beside A and B) through masters {0, 3, 4}: the checker must flag it.
//
// Weighted permits: A takes 3 of a limit of 4 and the workers ask for 2, so the control's
// overlap is two holders of five permits, which only the checker's weighted rule sees.

const TTL = 4_000;
const WORKER_TTL = 1_000;
const ATTEMPTS = 12;

let fleet: RedisFleet;
const opened: Redis[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(5);
  // The fleet's servers just started: an engine with the quarantine on waits (exactly, not by
  // polling) until they are older than its window before it counts them.
  const clients = await connectMasters(fleet.urls());
  opened.push(...clients);
  const warm = new Redlock(clients, { restartQuarantineMs: TTL, logger: { warn: () => {} } });
  await (await warm.acquire('warm-up', 1_000, { waitTimeoutMs: 20_000 })).release();
});

afterAll(async () => {
  disconnectAll(opened.splice(0));
  await fleet?.stopAll();
});

/** An ioredis client for an address nobody listens on: every command fails at once. */
async function deadMaster(): Promise<Redis> {
  const client = new Redis(`redis://127.0.0.1:${await freePort()}`, { ...LOCK_CLIENT_OPTIONS, lazyConnect: true });
  client.on('error', () => {});
  opened.push(client);
  return client;
}

/** Records one engine's acquisitions and releases as the safety suite's workers do. */
class Recorder {
  #ids = 0;
  constructor(
    private readonly history: History,
    private readonly proc: string,
  ) {}

  /** `single`: the call is one round (tryAcquire), which the checker's validity rule judges more strictly. */
  async acquire(take: () => Promise<Lock | null>, resource: string, ttl: number, single = true): Promise<Lock | null> {
    const worker = 0;
    const id = `${this.proc}/${worker}/${++this.#ids}`;
    const base = { proc: this.proc, worker, resource, id, ttl };
    this.history.record({ ...base, op: 'acquire', phase: 'invoke', t: now(), single });
    try {
      const lock = await take();
      const t = now();
      if (!lock) {
        this.history.record({ ...base, op: 'acquire', phase: 'fail', t, code: 'LOCK_HELD' });
        return null;
      }
      this.history.record({
        ...base,
        op: 'acquire',
        phase: 'ok',
        t,
        token: lock.token,
        validUntil: t + nsFromMs(lock.remainingMs()),
        driftFactor: 0.01,
        single,
        ...(lock.mode === 'read' ? { mode: 'read' as const } : {}),
        ...(lock.limit > 1 ? { limit: lock.limit } : {}),
        ...(lock.permits > 1 ? { permits: lock.permits } : {}),
      });
      return lock;
    } catch (error) {
      this.history.record({ ...base, op: 'acquire', phase: 'fail', t: now(), code: (error as { code?: string }).code ?? String(error) });
      return null;
    }
  }

  async release(lock: Lock): Promise<void> {
    this.history.record({ proc: this.proc, worker: 0, op: 'release', phase: 'invoke', t: now(), token: lock.token, resource: lock.resources[0] });
    await lock.release();
  }
}

/**
 * A reaches exactly a quorum (3 of 5), so on a loaded machine one slow reply fails its round:
 * the holders try a few rounds, each recorded, before the fault that the scenario is about.
 */
async function holdBeforeTheFault(recorder: Recorder, take: () => Promise<Lock | null>, resource: string): Promise<Lock | null> {
  for (let i = 0; i < 5; i++) {
    const lock = await recorder.acquire(take, resource, TTL);
    if (lock) return lock;
  }
  return null;
}

type Shape = 'rw' | 'semaphore' | 'weighted';

/** What A (and B) hold, and what the workers ask for. */
const OPTIONS: Record<Shape, { hold: TryAcquireOptions; worker: TryAcquireOptions }> = {
  rw: { hold: { mode: 'read' }, worker: {} },
  semaphore: { hold: { limit: 2 }, worker: { limit: 2 } },
  weighted: { hold: { limit: 4, permits: 3 }, worker: { limit: 4, permits: 2 } },
};

async function scenario(kind: Shape, quarantine: boolean) {
  const history = new History();
  const resource = `${kind}-${quarantine ? 'guarded' : 'control'}`;
  const { hold: holdOptions, worker: workerOptions } = OPTIONS[kind];

  // A reaches masters 0-2 only; its clients for "3" and "4" point where nobody listens.
  const reachable = await connectMasters(fleet.urls().slice(0, 3));
  opened.push(...reachable);
  const a = new Redlock([...reachable, await deadMaster(), await deadMaster()], { ...FRESH_FLEET, logger: { warn: () => {} } });
  expect(await holdBeforeTheFault(new Recorder(history, 'A'), () => a.tryAcquire(resource, TTL, holdOptions), resource)).not.toBeNull();
  if (kind === 'semaphore') {
    const all = await connectMasters(fleet.urls());
    opened.push(...all);
    const b = new Redlock(all, { ...FRESH_FLEET, logger: { warn: () => {} } });
    expect(await holdBeforeTheFault(new Recorder(history, 'B'), () => b.tryAcquire(resource, TTL, holdOptions), resource)).not.toBeNull();
  }

  const workers = await Promise.all(
    [0, 1, 2].map(async () => {
      const clients = await connectMasters(fleet.urls());
      opened.push(...clients);
      const options = quarantine ? { restartQuarantineMs: TTL } : FRESH_FLEET;
      const engine = new Redlock(clients, { ...options, nodeTimeoutMs: 1_000, logger: { warn: () => {} } });
      await engine.verifyMasters(); // identified now: the restart below is a changed run_id
      return { engine, clients };
    }),
  );
  const notices: QuarantineNotice[] = [];
  for (const { engine } of workers) engine.on('quarantine', (notice: QuarantineNotice) => notices.push(notice));

  await fleet.restart(0); // without persistence: A's (and B's) entries on master 0 are gone
  history.record({ proc: 'fault', worker: 0, op: 'fault', phase: 'ok', t: now(), note: 'restart master 0 empty' });
  await Promise.all(workers.flatMap(({ clients }) => clients).map(untilReady));

  await Promise.all(
    workers.map(async ({ engine }, index) => {
      const recorder = new Recorder(history, `w${index}`);
      for (let i = 0; i < ATTEMPTS; i++) {
        const lock = await recorder.acquire(() => engine.tryAcquire(resource, WORKER_TTL, workerOptions), resource, WORKER_TTL);
        if (lock) {
          await sleep(5); // the work
          await recorder.release(lock);
        }
        await sleep(10 + Math.random() * 20);
      }
    }),
  );
  if (quarantine) {
    // Safe is not the same as stuck: once A's hold and the quarantine are over, a worker gets in.
    const later = await new Recorder(history, 'w0').acquire(
      () => workers[0]!.engine.acquire(resource, WORKER_TTL, { ...workerOptions, waitTimeoutMs: 20_000 }),
      resource,
      WORKER_TTL,
      false,
    );
    expect(later).not.toBeNull();
    await later!.release();
  }
  for (const { engine } of workers) engine.close();
  return { result: checkHistory(history.events()), notices };
}

describe.each(['rw', 'semaphore', 'weighted'] as const)('%s: a master of the holder’s majority restarted empty at once', (kind) => {
  it('never lets a holder in beyond the rules while the restart quarantine is on', async () => {
    const { result, notices } = await scenario(kind, true);
    expect(summarize(result)).toMatch(/ 0 violations/);
    expect(notices.some((n) => n.node === `127.0.0.1:${fleet.nodes[0]!.port}`)).toBe(true);
  }, 60_000);

  it('is flagged by the checker with the quarantine off (control)', async () => {
    const { result } = await scenario(kind, false);
    const flagged = kind === 'rw' ? result.counts['writer-shared'] : result.counts['over-limit'];
    expect(flagged, summarize(result)).toBeGreaterThan(0);
  }, 60_000);
});
