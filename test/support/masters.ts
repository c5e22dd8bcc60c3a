import { once } from 'node:events';
import { Redis, type RedisOptions } from 'ioredis';
import { Redlock, type RedlockInstrumentation, type RedlockOptions } from '../../lib/index.js';
import { SHARED_ACQUIRE_SCRIPT, SHARED_ACQUIRES_SCRIPT } from '../../lib/core/kinds/shared/shared-scripts.js';
import type { RedlockClient } from '../../lib/core/voters/clients/clients.js';

/**
 * ioredis clients as a lock user should configure them: no offline queue, so a dead master
 * fails the request at once instead of holding it until reconnection.
 */
export const LOCK_CLIENT_OPTIONS: RedisOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  retryStrategy: (times) => Math.min(times * 20, 200),
};

export function connectMasters(urls: readonly string[], options: RedisOptions = {}): Promise<Redis[]> {
  return connectVoters(urls, options);
}

/** A lock client for one voter (a URL, or ioredis options), not connected yet. */
export function lockClient(voter: string | RedisOptions, options: RedisOptions = {}): Redis {
  const client = typeof voter === 'string' ? new Redis(voter, { ...LOCK_CLIENT_OPTIONS, ...options }) : new Redis({ ...LOCK_CLIENT_OPTIONS, ...voter, ...options });
  // Reconnection errors while a test has a master down are expected; failed commands still reject.
  client.on('error', () => {});
  return client;
}

/**
 * One client per voter, each a URL or ioredis options (such as a Sentinel-managed master's
 * `sentinels` and `name`), configured like connectMasters' clients, once all are ready.
 */
export async function connectVoters(voters: readonly (string | RedisOptions)[], options: RedisOptions = {}): Promise<Redis[]> {
  const clients = voters.map((voter) => lockClient(voter, options));
  await Promise.all(clients.map(untilReady));
  return clients;
}

/** Resolves when the client can take commands (it reconnects by itself after a restart). */
export async function untilReady(client: Redis): Promise<void> {
  if (client.status === 'ready') return;
  await once(client, 'ready');
}

/** Closes clients of either library at once (no QUIT: a master may be down). */
export function disconnectAll(clients: Iterable<Redis | RedlockClient>): void {
  for (const client of clients) {
    if (typeof (client as Partial<Redis>).disconnect === 'function' && typeof (client as Partial<Redis>).evalsha === 'function') {
      (client as Redis).disconnect();
      continue;
    }
    // node-redis: destroy() (v5) and disconnect() (v4) throw once the client is closed.
    const nodeRedis = client as unknown as { isOpen: boolean; destroy?(): void; disconnect(): Promise<void> };
    if (!nodeRedis.isOpen) continue;
    if (nodeRedis.destroy) nodeRedis.destroy();
    else nodeRedis.disconnect().catch(() => {});
  }
}

/** Every key on every master, for asserting what a lock left behind. */
export async function keysOn(clients: readonly Redis[], pattern = '*'): Promise<string[][]> {
  return Promise.all(clients.map((client) => client.keys(pattern)));
}

/**
 * Engine options for tests on a fleet that just started: every master is "recently started",
 * which the restart quarantine (on by default) would rightly refuse to count. Tests of the
 * quarantine itself leave it on.
 */
export const FRESH_FLEET = { restartQuarantineMs: false } as const;

/**
 * For tests that count rounds or requests with no master down (a pause, if any, is shorter than
 * this): a reply slower than the default node timeout (10% of the ttl, at most 1 s: 100 ms for a
 * 1 s lock) on a loaded machine is not a fault there, and must not cost a round.
 */
export const PATIENT = { nodeTimeoutMs: 2_000 } as const;

/**
 * An engine with connections of its own, a separate process as far as the masters can tell;
 * its clients go into `opened`, for the test file to close.
 */
export async function separateEngine(
  urls: readonly string[],
  opened: (Redis | RedlockClient)[],
  options: RedlockOptions = {},
): Promise<{ redlock: Redlock; clients: Redis[] }> {
  const clients = await connectMasters(urls);
  opened.push(...clients);
  const redlock = new Redlock(clients, { ...FRESH_FLEET, ...options });
  // Identified before its first round, so its takes all go out at once, as a long-lived engine's do.
  await redlock.verifyMasters();
  return { redlock, clients };
}

/**
 * From now on, tells `observe` of every `method` call on `client`: its arguments, and the
 * reply it will settle with. For counting what the engine sends a master, without a mock.
 */
export function watchCalls(
  client: Redis | RedlockClient,
  method: 'set' | 'eval' | 'evalsha' | 'wait',
  observe: (args: unknown[], reply: Promise<unknown>) => void,
): void {
  if (typeof (client as { evalsha?: unknown }).evalsha !== 'function') {
    // node-redis: the engine sends every command through sendCommand, its name first.
    const nodeRedis = client as unknown as { sendCommand(args: string[], ...rest: unknown[]): Promise<unknown> };
    const send = nodeRedis.sendCommand.bind(nodeRedis);
    nodeRedis.sendCommand = (args, ...rest) => {
      const reply = send(args, ...rest);
      if (args[0]?.toLowerCase() === method) observe(args.slice(1), reply);
      return reply;
    };
    return;
  }
  const redis = client as Redis;
  const original = (redis[method] as (...args: unknown[]) => Promise<unknown>).bind(redis);
  (client as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
    const reply = original(...args);
    // As ioredis sends them: an array argument stands for its elements.
    observe(args.flat(), reply);
    return reply;
  };
}

/** Per shared-hold acquire round the engine sends `client` from now on, the waiter id it carries (ARGV[4]). */
export function sharedRoundsOn(client: Redis): string[] {
  const rounds: string[] = [];
  watchCalls(client, 'evalsha', (args) => rounds.push(...sharedAcquireWaiters(args)));
  return rounds;
}

/**
 * The waiter id (ARGV[4]) of each shared-hold acquire request one EVALSHA carries: one for
 * SHARED_ACQUIRE_SCRIPT, each request's for a batch (SHARED_ACQUIRES_SCRIPT: ARGV is the count,
 * each request's key and argument counts, then their arguments in turn), none for other scripts.
 */
export function sharedAcquireWaiters(args: readonly unknown[]): string[] {
  const argv = args.slice(2 + Number(args[1])).map(String);
  if (args[0] === SHARED_ACQUIRE_SCRIPT.sha) return [argv[3]!];
  if (args[0] !== SHARED_ACQUIRES_SCRIPT.sha) return [];
  const count = Number(argv[0]);
  const ids: string[] = [];
  let at = 1 + 2 * count;
  for (let request = 0; request < count; request++) {
    ids.push(argv[at + 3]!);
    at += Number(argv[2 + 2 * request]);
  }
  return ids;
}

/** Per acquire of the engine given `instrumentation`, in the order they began, whether it has reported waiting. */
export function waitingReports(): { waited: boolean[]; instrumentation: RedlockInstrumentation } {
  const waited: boolean[] = [];
  const instrumentation = {
    acquireStarted: () => {
      const call = waited.push(false) - 1;
      return { waiting: () => (waited[call] = true) };
    },
  };
  return { waited, instrumentation };
}
