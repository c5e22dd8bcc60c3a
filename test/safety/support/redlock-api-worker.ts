/**
 * A safety worker on node-redlock's API (issue 31's mixed fleet): the `redlock` package itself
 * (npm 5.0.0-beta.2), or this package's `nestjs-redlock/node-redlock` entry point, as
 * `config.redlockApi.library` says. Like worker.ts in `loop` mode, its `workers` async loops take
 * the lock on one resource each, read-modify-write the store's unfenced counter under it
 * (node-redlock has no fencing token), extend once in some cycles, and release; every operation
 * goes into the history with process.hrtime.bigint().
 *
 * What a hold promises, on the shared monotonic clock:
 * - `redlock`: its `expiration`, wall-clock ms: the instant before its first round, plus the
 *   duration, less the drift. It is turned into hrtime where it is read, `Date.now()` and
 *   `now()` side by side, less 1 ms for `Date.now()`'s truncation: never later than the real
 *   deadline. node-redlock hands out a lock whose expiration has passed (a slow acquire); a careful
 *   caller does not use it, so neither does this worker (recorded as a failed acquire, released).
 * - `entry`: the engine's lock underneath, `lock.lock.remainingMs()` (monotonic), as worker.ts
 *   reads an engine lock's.
 */
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { Lock as EngineLock, RedlockOptions } from '../../../lib/core/index.js';
import EntryRedlock from '../../../lib/node-redlock/index.js';
import { connectMasters, disconnectAll } from '../../support/masters.js';
import { deadlineAtCall, now, nsFromMs } from './history.js';
import { ask, config, proc, record, runWorker, send, stopping } from './worker-ipc.js';

const api = config.redlockApi!;

// ---------------------------------------------------------------- the two libraries, one shape

/** What node-redlock's Lock and the entry point's share (the entry's also has `lock`, the engine's). */
interface ApiLock {
  readonly value: string;
  readonly expiration: number;
  readonly attempts: readonly unknown[];
  readonly lock?: EngineLock;
  extend(duration: number): Promise<ApiLock>;
}

interface ApiSettings {
  driftFactor?: number;
  retryCount?: number;
  retryDelay?: number;
  retryJitter?: number;
}

interface ApiRedlock {
  acquire(resources: string[], duration: number, settings?: ApiSettings): Promise<ApiLock>;
  release(lock: ApiLock, settings?: ApiSettings): Promise<unknown>;
  on(event: 'error', listener: (error: unknown) => void): unknown;
}

type ApiRedlockClass = new (clients: Redis[], settings?: ApiSettings, scripts?: Record<string, never>, options?: RedlockOptions) => ApiRedlock;

/** The package as node-redlock's users load it from CommonJS: `require('redlock').default`. */
function nodeRedlock(): ApiRedlockClass {
  const required = createRequire(import.meta.url)('redlock') as { default: ApiRedlockClass };
  return required.default;
}

const DRIFT_FACTOR = 0.01;
const SETTINGS: ApiSettings = { driftFactor: DRIFT_FACTOR, retryCount: api.retryCount, retryDelay: api.retryDelay, retryJitter: api.retryJitter };

let clients: Redis[] = [];
let redlock: ApiRedlock;

async function connect(): Promise<void> {
  clients = await connectMasters(config.urls);
  redlock =
    api.library === 'redlock'
      ? new (nodeRedlock())(clients, SETTINGS)
      : new (EntryRedlock as unknown as ApiRedlockClass)(clients, SETTINGS, {}, config.engine as RedlockOptions);
  // Both report every refused vote as an 'error' event (and listen to it themselves).
  redlock.on('error', () => {});
}

// ---------------------------------------------------------------- deadlines on the shared clock

/** How many ms the lock says it has left, right now. */
function remainingMs(lock: ApiLock): number {
  if (api.library === 'entry') return lock.lock!.remainingMs();
  // Date.now() truncates to the ms: the wall clock may be up to 1 ms further on.
  return lock.expiration - Date.now() - 1;
}

/** The deadline each lock (by token) stated last in the history: see worker.ts's `claims`. */
const claims = new Map<string, bigint>();

function claimed(token: string, until: bigint): bigint {
  claims.set(token, until);
  return until;
}

// ---------------------------------------------------------------- one cycle

const pick = <T>(list: readonly T[]): T => list[Math.floor(Math.random() * list.length)]!;
const random = (max: number | undefined) => (max ? Math.random() * max : 0);
let ids = 0;
let cycles = 0;
let acquireFailures = 0;

function codeOf(error: unknown): string {
  return error instanceof Error ? error.name || error.constructor.name : typeof error;
}

function messageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 400);
}

function roundsOf(error: unknown): number | undefined {
  const attempts = (error as { attempts?: unknown } | undefined)?.attempts;
  return Array.isArray(attempts) ? attempts.length : undefined;
}

interface Cycle {
  worker: number;
  resource: string;
  ttl: number;
  id: string;
}

async function acquire(cycle: Cycle): Promise<ApiLock | undefined> {
  const { worker, resource, ttl, id } = cycle;
  // Never `single`: these acquires take several rounds, and the checker's single-round rule
  // (validity-excess on acquire) states the engine's own promise, not node-redlock's.
  record({ worker, op: 'acquire', phase: 'invoke', id, resource, ttl });
  let lock: ApiLock;
  try {
    lock = await redlock.acquire([resource], ttl, SETTINGS);
  } catch (error) {
    acquireFailures++;
    const rounds = roundsOf(error);
    record({ worker, op: 'acquire', phase: 'fail', id, resource, code: codeOf(error), error: messageOf(error), ...(rounds ? { note: `rounds ${rounds}` } : {}) });
    return undefined;
  }
  const at = now();
  const until = at + nsFromMs(remainingMs(lock));
  const note = `rounds ${lock.attempts.length}`;
  if (until <= at) {
    // node-redlock's lock whose expiration passed before it was handed over: not relied on.
    acquireFailures++;
    record({ worker, op: 'acquire', phase: 'fail', id, resource, t: at, code: 'EXPIRED_ON_ARRIVAL', note });
    await redlock.release(lock, { retryCount: 0 }).catch(() => {});
    return undefined;
  }
  record({ worker, op: 'acquire', phase: 'ok', id, resource, ttl, t: at, driftFactor: DRIFT_FACTOR, token: lock.value, validUntil: claimed(lock.value, until), note });
  return lock;
}

async function storeOp(cycle: Cycle, lock: ApiLock, op: 'read' | 'write', plain?: number) {
  const { worker, resource } = cycle;
  const id = `${cycle.id}:${op}`;
  const token = lock.value;
  record({ worker, op, phase: 'invoke', id, resource, token, ...(plain === undefined ? {} : { plain }) });
  const reply = await ask('store', { op, resource, token, proc, worker, ...(plain === undefined ? {} : { plain }) });
  record({ worker, op, phase: reply.accepted ? 'ok' : 'fail', id, resource, token, seq: reply.seq, value: reply.value, plain: reply.plain });
  return reply;
}

/**
 * One extend by the cycle's ttl. Afterwards the lock claims, as worker.ts's do: while it says it
 * has time left, that; once it says none, the earliest of now, the deadline before the call and
 * invoke + ttl. A failed node-redlock extend keeps the old Lock, whose expiration still stands:
 * an extend by the cycle's ttl on a minority only lengthens the keys' lives.
 */
async function extend(cycle: Cycle, lock: ApiLock): Promise<ApiLock> {
  const { worker, resource, ttl } = cycle;
  const id = `${cycle.id}:extend`;
  const token = lock.value;
  const invokedAt = now();
  const before = deadlineAtCall(invokedAt, remainingMs(lock), claims.get(token));
  record({ worker, op: 'extend', phase: 'invoke', id, resource, token, ttl, t: invokedAt });
  const after = (current: ApiLock) => {
    const remaining = remainingMs(current);
    const at = now();
    if (remaining > 0) return at + nsFromMs(remaining);
    const bound = invokedAt + nsFromMs(ttl);
    return [at, before, bound].reduce((a, b) => (b < a ? b : a));
  };
  try {
    const extended = await lock.extend(ttl);
    record({ worker, op: 'extend', phase: 'ok', id, resource, token, ttl, validUntil: claimed(token, after(extended)), note: `rounds ${extended.attempts.length}` });
    return extended;
  } catch (error) {
    record({ worker, op: 'extend', phase: 'fail', id, resource, token, ttl, validUntil: claimed(token, after(lock)), code: codeOf(error), error: messageOf(error) });
    return lock;
  }
}

async function release(cycle: Cycle, lock: ApiLock): Promise<void> {
  const { worker, resource } = cycle;
  const id = `${cycle.id}:release`;
  const token = lock.value;
  record({ worker, op: 'release', phase: 'invoke', id, resource, token });
  try {
    // One round: a lock that ran out and was taken over meanwhile is refused everywhere, and
    // node-redlock would retry that refusal for its whole retry window.
    await redlock.release(lock, { retryCount: 0 });
    record({ worker, op: 'release', phase: 'ok', id, resource, token });
  } catch (error) {
    record({ worker, op: 'release', phase: 'fail', id, resource, token, code: codeOf(error), error: messageOf(error) });
  }
}

async function loopCycle(worker: number, resource: string): Promise<boolean> {
  const cycle: Cycle = { worker, resource, ttl: pick(config.ttlMs), id: `${proc}:${worker}:${++ids}` };
  let lock = await acquire(cycle);
  if (!lock) return false;
  try {
    const read = await storeOp(cycle, lock, 'read');
    if (config.holdMs) await sleep(random(config.holdMs));
    if (Math.random() < api.extendShare) lock = await extend(cycle, lock);
    // Writes only while the lock is trustworthy, with worker.ts's margin.
    const margin = config.writeMarginMs ?? Math.max(cycle.ttl / 4, 100);
    if (remainingMs(lock) > margin) await storeOp(cycle, lock, 'write', read.plain + 1);
  } finally {
    await release(cycle, lock);
  }
  cycles++;
  return true;
}

async function backOff(): Promise<void> {
  await sleep(20 + Math.random() * 50, undefined, { signal: stopping.signal }).catch(() => {});
}

async function main(): Promise<void> {
  await connect();
  send({ type: 'ready' });
  await Promise.all(
    Array.from({ length: config.workers }, async (_, worker) => {
      const resource = config.resources[worker % config.resources.length]!;
      while (!stopping.signal.aborted) {
        if (!(await loopCycle(worker, resource))) await backOff();
        if (config.pauseMs) await sleep(random(config.pauseMs), undefined, { signal: stopping.signal }).catch(() => {});
      }
    }),
  );
  (redlock as { engine?: { close(): void } }).engine?.close();
  disconnectAll(clients);
}

runWorker(main, () => ({ cycles, acquireFailures }));
