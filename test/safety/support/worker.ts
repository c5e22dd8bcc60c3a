/**
 * A worker process of the safety suite (started by SafetyRun.spawn, compiled on load by
 * test/support/ts-loader). It runs `workers` async loops that take the lock and, inside it, read-modify-write
 * the fenced store that lives in the test process; it records every operation with
 * process.hrtime.bigint() and sends the events to the test process in batches.
 */
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedlockClient } from '../../../lib/core/voters/clients/clients.js';
import { autoExtend } from '../../../lib/core/acquire/auto-extender.js';
import { Redlock, RedlockError, type Lock, type QuarantineNotice } from '../../../lib/core/index.js';
import { disconnectAll } from '../../support/masters.js';
import { CLIENT_LIBRARIES, connectLockClients, type ClientLibrary } from '../../support/lock-clients.js';
import { connectSafetyVoters } from './cluster-client.js';
import { cycleShape, sharesResource, type CycleShape } from './cycle-shape.js';
import { deadlineAtCall, now, nsFromMs } from './history.js';
import type { LoseReplyRequest } from './protocol.js';
import { ask, config, flush, goListeners, proc, record, runWorker, send, stopping } from './worker-ipc.js';

// ---------------------------------------------------------------- engines

interface Engine {
  redlock: Redlock;
  clients: RedlockClient[];
}

const engines: Engine[] = [];

/**
 * The library the engines' clients are from: SAFETY_CLIENT (`npm run test:safety -- --client
 * node-redis`), ioredis by default. Voters given as Sentinel or Cluster options are ioredis's alone.
 */
const LIBRARY = clientLibrary(process.env['SAFETY_CLIENT']);

function clientLibrary(name: string | undefined): ClientLibrary {
  if (name === undefined || name === '') return 'ioredis';
  if (!(CLIENT_LIBRARIES as readonly string[]).includes(name)) throw new Error(`SAFETY_CLIENT must be one of ${CLIENT_LIBRARIES.join(', ')} (got ${name})`);
  return name as ClientLibrary;
}

async function newEngine(): Promise<Engine> {
  const clients = config.voters ? await connectSafetyVoters(config.voters) : await connectLockClients(LIBRARY, config.urls);
  // Warnings go into the history: a scenario can check what the engine told its operator.
  const logger = { warn: (message: string) => record({ worker: -1, op: 'warning', phase: 'ok', note: message.slice(0, 400) }) };
  // Tells `acquire` which of its calls were granted by hand-off, and when the engine began and
  // ended the call by its own clock: the observer is made synchronously inside the call, so it
  // takes the record set just before it.
  const instrumentation = {
    acquireStarted: () => {
      const call = observing;
      if (!call) return undefined;
      call.startedAt = now();
      return {
        handedOff: () => void (call.handedOff = true),
        round: (_granted: number, durationMs: number) => void (call.roundMs = durationMs),
        ended: (_outcome: unknown, _error: unknown, durationMs: number) => void (call.durationMs = durationMs),
      };
    },
    // The deadline as the engine hands the lock out: read later, a lock whose validity ran out
    // while its worker was descheduled says only "over", not when.
    lockHeld: (lock: Lock) => {
      const remaining = lock.remainingMs();
      if (!deadlines.has(lock)) deadlines.set(lock, now() + nsFromMs(remaining));
    },
  };
  const redlock = new Redlock(clients, { ...config.engine, logger, instrumentation });
  redlock.on('quarantine', (notice: QuarantineNotice) =>
    record({ worker: -1, op: 'quarantine', phase: 'ok', note: `${notice.node} ${notice.reason} ${Math.round(notice.remainingMs)} ms` }),
  );
  const engine = { redlock, clients };
  engines.push(engine);
  return engine;
}

// ---------------------------------------------------------------- helpers

const pick = <T>(list: readonly T[]): T => list[Math.floor(Math.random() * list.length)]!;
const random = (max: number | undefined) => (max ? Math.random() * max : 0);

function codeOf(error: unknown): string {
  if (error instanceof RedlockError) return error.code;
  return error instanceof Error ? error.constructor.name : typeof error;
}

function messageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 400);
}

/**
 * The deadline each lock stated last in the history. Once its deadline has passed a lock says
 * only "over", not when: an extend invoked after that stands its claim on this, not on the time
 * of the call (which a stalled event loop can put well after the real deadline, so that holders
 * who came in between looked like an overlap).
 */
const claims = new WeakMap<Lock, bigint>();

/** Each lock's deadline on the shared clock when its engine handed it out (see newEngine). */
const deadlines = new WeakMap<Lock, bigint>();

function claimed(lock: Lock, until: bigint): bigint {
  claims.set(lock, until);
  return until;
}

/** Where the lock's validity ends on the shared clock. remainingMs first: never understates it. */
function validUntil(lock: Lock): bigint {
  const remaining = lock.remainingMs();
  return now() + nsFromMs(remaining);
}

/**
 * The lock's deadline after an extend of `ttl` invoked at `invokedAt`, when it was `before`.
 * While the lock says it has time left, that is its deadline. At 0 it says only that the
 * deadline has passed, not when (perhaps well before a busy event loop got round to the reply):
 * then the earliest of now, the old deadline and invoke + ttl stands in for it. No master drops
 * our key before the earlier of the last two, so no other holder can exist before this time, and
 * nobody relied on the lock between the call and now.
 */
function validUntilAfterExtend(lock: Lock, invokedAt: bigint, ttl: number, before: bigint): bigint {
  const remaining = lock.remainingMs();
  const at = now();
  if (remaining > 0) return at + nsFromMs(remaining);
  const bound = invokedAt + nsFromMs(ttl);
  return [at, before, bound].reduce((a, b) => (b < a ? b : a));
}

let cycles = 0;
let acquireFailures = 0;

interface Cycle {
  worker: number;
  resource: string;
  ttl: number;
  id: string;
  shape: CycleShape;
}

let opIds = 0;
/**
 * What the engine's observer saw of one acquire call (see newEngine): whether a hand-off granted
 * it, and when the engine began it and how long until its grant, by the engine's own clock reads.
 * The worker's invoke and ok events lie outside those: a worker descheduled between them would
 * make an honest promise of validity look too long, by up to twice the gap.
 */
interface Observed {
  handedOff: boolean;
  startedAt?: bigint;
  durationMs?: number;
  roundMs?: number;
}

/** The acquire call being started, for the engine's observer (see newEngine). */
let observing: Observed | undefined;
function newCycle(worker: number, resource: string, shape = cycleShape(config.shared)): Cycle {
  return { worker, resource, ttl: pick(config.ttlMs), id: `${proc}:${worker}:${++opIds}`, shape };
}

async function acquire(engine: Engine, cycle: Cycle): Promise<Lock | undefined> {
  const { worker, resource, ttl, id } = cycle;
  const single = config.single === true;
  // What the checker judges as one round: a permit's tryAcquire may take a second try at once
  // (masters split on the slot), whose validity counts from its own start.
  const oneRound = single && (cycle.shape.limit ?? 1) <= 1;
  record({ worker, op: 'acquire', phase: 'invoke', id, resource, ttl, single: oneRound });
  const observed: Observed = { handedOff: false };
  try {
    observing = observed;
    const acquiring = single
      ? engine.redlock.tryAcquire(resource, ttl, { fencing: true, ...cycle.shape })
      : engine.redlock.acquire(resource, ttl, waitingOptions(cycle));
    observing = undefined;
    const lock = await acquiring;
    if (!lock) {
      acquireFailures++;
      record({ worker, op: 'acquire', phase: 'fail', id, resource, code: 'LOCK_HELD' });
      return undefined;
    }
    acquired(engine, cycle, lock, observed, oneRound);
    return lock;
  } catch (error) {
    acquireFailures++;
    record({ worker, op: 'acquire', phase: 'fail', id, resource, code: codeOf(error), error: messageOf(error) });
    return undefined;
  }
}

/** The options of a waiting acquire for this cycle's shape: fenced unless the shape says not. */
function waitingOptions(cycle: Cycle) {
  return { ...cycle.shape, fencing: cycle.shape.fencing ?? true, signal: stopping.signal, waitTimeoutMs: config.waitTimeoutMs ?? 10_000 };
}

/**
 * Records a successful acquire: the lock as the caller may now rely on it, with the engine's own
 * timing of the call when its observer saw it. `oneRound`: a single round's call.
 */
function acquired(engine: Engine, cycle: Cycle, lock: Lock, observed: Observed, oneRound = false): void {
  const { handedOff, startedAt, durationMs, roundMs } = observed;
  const { worker, resource, ttl, id } = cycle;
  record({
    worker,
    op: 'acquire',
    phase: 'ok',
    id,
    resource,
    ttl,
    single: oneRound,
    ...(startedAt !== undefined && durationMs !== undefined ? { engineStartedAt: startedAt, engineMs: durationMs } : {}),
    ...(roundMs !== undefined ? { engineRoundMs: roundMs } : {}),
    ...(handedOff ? { handedOff: true } : {}),
    driftFactor: engine.redlock.options.driftFactor,
    token: lock.token,
    fence: lock.fence,
    validUntil: claimed(lock, deadlines.get(lock) ?? validUntil(lock)),
    ...(lock.mode === 'read' ? { mode: 'read' as const } : {}),
    ...(lock.limit > 1 ? { limit: lock.limit } : {}),
    ...(lock.permits > 1 ? { permits: lock.permits } : {}),
  });
}

async function storeOp(cycle: Cycle, lock: Lock, op: 'read' | 'write', values: { value?: number; plain?: number } = {}) {
  const { worker, resource } = cycle;
  const id = `${cycle.id}:${op}`;
  record({ worker, op, phase: 'invoke', id, resource, token: lock.token, fence: lock.fence, ...values });
  const reply = await ask('store', { op, resource, fence: lock.fence, token: lock.token, proc, worker, ...values });
  record({
    worker,
    op,
    phase: reply.accepted ? 'ok' : 'fail',
    id,
    resource,
    token: lock.token,
    fence: lock.fence,
    seq: reply.seq,
    value: reply.value,
    plain: reply.plain,
    ...(reply.accepted ? {} : { code: 'STALE_FENCE', note: `store had seen fence ${reply.highestFence}` }),
  });
  return reply;
}

/** The read-modify-write: the fenced value always, the unfenced one only while the lock is trustworthy. */
async function readModifyWrite(cycle: Cycle, lock: Lock, beforeWrite?: () => Promise<void>): Promise<void> {
  const read = await storeOp(cycle, lock, 'read');
  if (!read.accepted) return;
  if (config.holdMs) await sleep(random(config.holdMs));
  await beforeWrite?.();
  const margin = config.writeMarginMs ?? Math.max(cycle.ttl / 4, 100);
  const trusted = lock.remainingMs() > margin;
  await storeOp(cycle, lock, 'write', { value: read.value + 1, ...(trusted ? { plain: read.plain + 1 } : {}) });
}

let extendIds = 0;

/** One extend; ok or failed, the deadline the lock claims afterwards goes into the history. */
async function extend(cycle: Cycle, lock: Lock, ttl = cycle.ttl): Promise<void> {
  const { worker, resource } = cycle;
  const id = `${cycle.id}:extend:${++extendIds}`;
  const invokedAt = now();
  const before = deadlineAtCall(invokedAt, lock.remainingMs(), claims.get(lock));
  record({ worker, op: 'extend', phase: 'invoke', id, resource, token: lock.token, ttl, t: invokedAt });
  try {
    await lock.extend(ttl);
    const until = claimed(lock, validUntilAfterExtend(lock, invokedAt, ttl, before));
    record({ worker, op: 'extend', phase: 'ok', id, resource, token: lock.token, ttl, validUntil: until });
  } catch (error) {
    const until = claimed(lock, validUntilAfterExtend(lock, invokedAt, ttl, before));
    record({ worker, op: 'extend', phase: 'fail', id, resource, token: lock.token, ttl, validUntil: until, code: codeOf(error), error: messageOf(error) });
  }
}

/**
 * With `extendTtls`: a few extends with random ttls, working in between, as long as the lock
 * says it still holds; a careful client stops working on a lock that says it is gone.
 */
async function extendSeveral(cycle: Cycle, lock: Lock): Promise<void> {
  const times = 1 + Math.floor(Math.random() * (config.extendsPerCycle ?? 3));
  for (let i = 0; i < times && lock.remainingMs() > 0; i++) {
    await extend(cycle, lock, pick(config.extendTtls!));
    if (lock.remainingMs() > 0 && config.holdMs) await sleep(random(config.holdMs));
  }
}

async function release(cycle: Cycle, lock: Lock): Promise<void> {
  const { worker, resource } = cycle;
  const id = `${cycle.id}:release`;
  record({ worker, op: 'release', phase: 'invoke', id, resource, token: lock.token });
  try {
    const result = await lock.release();
    record({
      worker,
      op: 'release',
      phase: 'ok',
      id,
      resource,
      token: lock.token,
      releasedOn: result.releasedOn,
      heldUntilRelease: result.heldUntilRelease,
    });
  } catch (error) {
    // release() is documented never to throw: that it did is worth seeing in the history.
    record({ worker, op: 'release', phase: 'unknown', id, resource, token: lock.token, code: codeOf(error), error: messageOf(error) });
  }
}

async function backOff(): Promise<void> {
  await sleep(20 + Math.random() * 50, undefined, { signal: stopping.signal }).catch(() => {});
}

// ---------------------------------------------------------------- one cycle per mode

const LOSSY_OPS = ['acquire', 'extend', 'release'] as const;
let lossyTurn = 0;

/** With `lossyReplies`: loses the reply of `op` on one master, if it is this cycle's turn. */
async function lossy<T>(op: LoseReplyRequest['op'], turn: LoseReplyRequest['op'] | undefined, run: () => Promise<T>): Promise<T> {
  if (op !== turn) return run();
  const request = { master: Math.floor(Math.random() * config.urls.length), op };
  await ask('lose-reply', request);
  try {
    return await run();
  } finally {
    await ask('restore', request);
  }
}

async function loopCycle(engine: Engine, worker: number, resource: string): Promise<boolean> {
  const cycle = newCycle(worker, resource);
  const turn = config.lossyReplies ? LOSSY_OPS[lossyTurn++ % LOSSY_OPS.length] : undefined;
  const lock = await lossy('acquire', turn, () => acquire(engine, cycle));
  if (!lock) return false;
  try {
    const extending = config.extendTtls
      ? () => extendSeveral(cycle, lock)
      : config.extend
        ? () => lossy('extend', turn, () => extend(cycle, lock))
        : undefined;
    if (sharesResource(cycle.shape)) {
      if (config.holdMs) await sleep(random(config.holdMs));
      await extending?.();
    } else {
      await readModifyWrite(cycle, lock, extending);
    }
  } finally {
    await lossy('release', turn, () => release(cycle, lock));
  }
  cycles++;
  return true;
}

/**
 * With `detachedReentry`: holds the lock through `using`, and inside it starts a task that
 * outlives the call (as a handler's fire-and-forget work does: a timer, a listener, a promise
 * nobody awaits) and asks for the same lock once the outer call has released it. The task
 * inherits the outer call's async context; it must take the lock for real, and the checker judges
 * its hold like any other (an engine that let it re-enter the released lock shows as a hold with
 * no validity, and as overlaps and lost updates).
 */
async function reentryCycle(engine: Engine, worker: number, resource: string): Promise<boolean> {
  let outerReturned!: () => void;
  const afterOuter = new Promise<void>((resolve) => (outerReturned = resolve));
  let detached: Promise<boolean> | undefined;
  const held = await usingCycle(engine, newCycle(worker, resource), () => {
    detached = afterOuter.then(() => usingCycle(engine, newCycle(worker, resource), undefined, DETACHED));
  });
  outerReturned();
  await detached;
  return held;
}

/** The note on a detached task's acquire events, for the report to count them. */
const DETACHED = 'detached reentry';

/** One cycle whose lock `using` takes and releases; `inside` runs first thing under the lock. */
async function usingCycle(engine: Engine, cycle: Cycle, inside?: () => void, note?: string): Promise<boolean> {
  const { worker, resource, ttl, id } = cycle;
  record({ worker, op: 'acquire', phase: 'invoke', id, resource, ttl, ...(note ? { note } : {}) });
  const observed: Observed = { handedOff: false };
  let held: Lock | undefined;
  try {
    observing = observed;
    const using = engine.redlock.using(
      resource,
      ttl,
      async (_signal, lock) => {
        held = lock;
        acquired(engine, cycle, lock, observed);
        inside?.();
        if (sharesResource(cycle.shape)) {
          if (config.holdMs) await sleep(random(config.holdMs));
        } else {
          await readModifyWrite(cycle, lock);
        }
        record({ worker, op: 'release', phase: 'invoke', id: `${id}:release`, resource, token: lock.token });
      },
      { ...waitingOptions(cycle), autoExtend: false },
    );
    observing = undefined;
    await using;
    record({ worker, op: 'release', phase: 'ok', id: `${id}:release`, resource, token: held!.token });
  } catch (error) {
    observing = undefined;
    if (held) {
      record({ worker, op: 'release', phase: 'unknown', id: `${id}:release`, resource, token: held.token, code: codeOf(error), error: messageOf(error) });
    } else {
      acquireFailures++;
      record({ worker, op: 'acquire', phase: 'fail', id, resource, code: codeOf(error), error: messageOf(error) });
    }
    return held !== undefined;
  }
  cycles++;
  return true;
}

async function stallCycle(engine: Engine, worker: number, resource: string): Promise<boolean> {
  // Fenced: the stalled holder's late write must be turned away by its fence.
  const cycle = newCycle(worker, resource, { ...cycleShape(config.shared), fencing: true });
  const lock = await acquire(engine, cycle);
  if (!lock) return false;
  const stopExtending = autoExtend(lock, cycle.ttl);
  try {
    const read = await storeOp(cycle, lock, 'read');
    if (!read.accepted) return true;
    const stallMs = config.stallMs!;
    // The deadline as it stands now (an early automatic extension would have moved it).
    record({ worker, op: 'extend', phase: 'ok', id: `${cycle.id}:as-of-stall`, resource, token: lock.token, validUntil: claimed(lock, validUntil(lock)), note: 'deadline when the stall began' });
    record({ worker, op: 'stall', phase: 'invoke', id: `${cycle.id}:stall`, resource, token: lock.token, fence: lock.fence, note: `${stallMs} ms` });
    const until = now() + nsFromMs(stallMs);
    while (now() < until) {
      // A synchronous stall, as a long GC pause or CPU-bound work would cause: no timer, no
      // extension, no I/O can run in this process meanwhile.
    }
    // Back in the event loop: the lost-lock signal should now fire (deadline timer or refused extension).
    const signal = lock.signal;
    const fired =
      signal.aborted ||
      (await Promise.race([once(signal, 'abort').then(() => true), sleep(2_000).then(() => false)]));
    const reason: unknown = signal.reason;
    record({
      worker,
      op: 'stall',
      phase: fired ? 'ok' : 'fail',
      id: `${cycle.id}:stall`,
      resource,
      token: lock.token,
      fence: lock.fence,
      signalFired: fired,
      code: reason === undefined ? undefined : codeOf(reason),
      error: reason === undefined ? undefined : messageOf(reason),
    });
    // A client that ignores the signal writes anyway: the fence must make the store refuse it.
    await storeOp(cycle, lock, 'write', { value: read.value + 1 });
  } finally {
    stopExtending();
    await release(cycle, lock);
  }
  cycles++;
  return true;
}

let probes = 0;
async function probeCycle(engine: Engine, worker: number): Promise<void> {
  const resource = `probe:${proc}:${++probes}`;
  const ttl = pick(config.ttlMs);
  const id = `${proc}:${worker}:probe:${probes}`;
  record({ worker, op: 'probe', phase: 'invoke', id, resource, ttl });
  let lock: Lock | null = null;
  try {
    lock = await engine.redlock.tryAcquire(resource, ttl);
    record({ worker, op: 'probe', phase: lock ? 'ok' : 'fail', id, resource, ...(lock ? {} : { code: 'LOCK_HELD' }) });
  } catch (error) {
    record({ worker, op: 'probe', phase: 'fail', id, resource, code: codeOf(error), error: messageOf(error) });
  }
  if (lock) {
    record({ worker, op: 'probe-release', phase: 'invoke', id: `${id}:release`, resource });
    const result = await lock.release();
    record({ worker, op: 'probe-release', phase: 'ok', id: `${id}:release`, resource, releasedOn: result.releasedOn });
  }
}

/** Whether this loop cycle is a detached reentry's (see reentryCycle): not with lost replies or tryAcquire, whose cycles have their own shape. */
function reentersDetached(): boolean {
  return !config.lossyReplies && !config.single && !config.extendTtls && Math.random() < (config.detachedReentry ?? 0);
}

// ---------------------------------------------------------------- main

async function runLoops(engineFor: (worker: number) => Engine): Promise<void> {
  const loops = Array.from({ length: config.workers }, async (_, worker) => {
    const engine = engineFor(worker);
    const resource = config.resources[worker % config.resources.length]!;
    while (!stopping.signal.aborted) {
      if (config.mode === 'probe') {
        await probeCycle(engine, worker);
      } else {
        const held =
          config.mode === 'stall'
            ? await stallCycle(engine, worker, resource)
            : reentersDetached()
              ? await reentryCycle(engine, worker, resource)
              : await loopCycle(engine, worker, resource);
        if (!held) await backOff();
      }
      if (config.pauseMs) await sleep(random(config.pauseMs), undefined, { signal: stopping.signal }).catch(() => {});
    }
  });
  await Promise.all(loops);
}

async function runHerd(engineFor: (worker: number) => Engine): Promise<void> {
  const episodes: Promise<void>[] = [];
  goListeners.add((at, episode) => {
    episodes.push(
      (async () => {
        // Sleep until just before the instant, then spin: every worker of every process starts
        // its acquire at the same microsecond, give or take the scheduler.
        const lead = Number(at - now()) / 1e6 - 3;
        if (lead > 0) await sleep(lead);
        while (now() < at) {
          /* spin */
        }
        await Promise.all(
          Array.from({ length: config.workers }, async (_, worker) => {
            const resource = config.resources[worker % config.resources.length]!;
            while (!stopping.signal.aborted && !(await loopCycle(engineFor(worker), worker, resource))) await backOff();
          }),
        );
        flush();
        send({ type: 'herd-done', episode });
      })(),
    );
  });
  send({ type: 'ready' });
  await once(stopping.signal, 'abort');
  await Promise.all(episodes);
}

async function main(): Promise<void> {
  const count = config.separateEngines ? config.workers : 1;
  const list = await Promise.all(Array.from({ length: count }, () => newEngine()));
  // A Cluster voter judges failovers against the slot map it read first: ready once it has, as
  // the Nest module is at bootstrap. A failover during that first reading is not covered.
  if (config.voters?.some((voter) => typeof voter === 'object' && 'cluster' in voter)) {
    await Promise.all(list.map(({ redlock }) => redlock.verifyMasters()));
  }
  const engineFor = (worker: number) => list[config.separateEngines ? worker : 0]!;
  if (config.mode === 'herd') {
    await runHerd(engineFor);
  } else {
    send({ type: 'ready' });
    await runLoops(engineFor);
  }
  for (const { redlock, clients } of engines) {
    (redlock as { close?: () => void }).close?.();
    disconnectAll(clients);
  }
}

runWorker(main, () => ({ cycles, acquireFailures }));
