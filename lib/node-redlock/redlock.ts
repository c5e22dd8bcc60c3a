import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import {
  InvalidArgumentError,
  LockLostError,
  QuorumError,
  Redlock as Engine,
  type Lock as EngineLock,
  type RedlockOptions,
  type RoundOutcomes,
} from '../core/index.js';
import { ExecutionError } from './errors.js';
import { statsOf } from './execution-stats.js';
import { Lock } from './lock.js';
import type { Client, ExecutionResult, ExecutionStats } from './types.js';

/** node-redlock's settings: of a Redlock, or of one call over them. */
export interface Settings {
  /** Share of the duration allowed for clock drift. Default 0.01. */
  readonly driftFactor: number;
  /** Rounds after the first before giving up; -1 for no end. Default 10. */
  readonly retryCount: number;
  /** Pause between rounds, in ms. Default 200. */
  readonly retryDelay: number;
  /** Random change of each pause, up to this many ms either way. Default 100. */
  readonly retryJitter: number;
  /** `using` extends the lock when this many ms of it are left. Default 500. */
  readonly automaticExtensionThreshold: number;
}

/** The signal `using` gives its routine: aborted when the lock is lost, with the reason in `error`. */
export type RedlockAbortSignal = AbortSignal & {
  /** Why the lock was lost, once the signal has aborted. */
  error?: Error;
};

const DEFAULT_SETTINGS: Readonly<Settings> = Object.freeze({
  driftFactor: 0.01,
  retryCount: 10,
  retryDelay: 200,
  retryJitter: 100,
  automaticExtensionThreshold: 500,
});

/**
 * The engine's options under this entry point, unless the fourth argument says otherwise: keys
 * named as node-redlock names them, and its durations.
 */
const COMPATIBLE_OPTIONS: RedlockOptions = {
  keyFormat: 'node-redlock',
  // node-redlock takes any integer duration; its users' code does too (docs/migration.md, "Long ttls").
  maxTtlMs: Number.MAX_SAFE_INTEGER,
  // node-redlock has no restart quarantine. Ours waits out every restart it sees, but trusts masters
  // at first sight: with node-redlock's long durations, judging their age would keep every master
  // that started less than the longest duration ago out of the vote (docs/from-node-redlock.md).
  quarantineAtFirstSight: false,
  // node-redlock's `using` extends for as long as the routine runs.
  maxExtensions: Number.POSITIVE_INFINITY,
};

/**
 * node-redlock's (`redlock` on npm, v5) `Redlock` on this package's engine: switching is one
 * import. Every round is the engine's: a round that fails gives back what it was granted
 * (Redlock step 5), a lock whose validity ran out during its round is refused (step 3), and with
 * the default key format processes on node-redlock and on this class exclude each other. What
 * differs from node-redlock, and why, is listed in docs/migration.md.
 *
 * Emits `'error'` for every master that refused or failed a round (node-redlock's event;
 * listened to by default, so it never crashes the process).
 */
export class Redlock extends EventEmitter {
  /** The masters, as given. */
  public readonly clients: Set<Client>;
  /** This instance's settings, over node-redlock's defaults. */
  public readonly settings: Settings;
  /** The engine underneath: its `acquire`, `using`, fencing and the rest of the native API. */
  public readonly engine: Engine;
  readonly #clients: Client[];
  /** Every master identified (or given up on), before the first round: see #identified. */
  #ready: Promise<void> | undefined;

  /**
   * `scripts` (node-redlock's custom Lua) cannot be honoured, the engine's scripts being its
   * own: giving any is refused. `options` are the engine's (RedlockOptions) over this entry
   * point's defaults: `keyFormat: 'node-redlock'`, an unbounded `maxTtlMs`,
   * `quarantineAtFirstSight: false` and unbounded extensions; `driftFactor` comes from `settings`.
   */
  public constructor(
    clients: Iterable<Client>,
    settings: Partial<Settings> = {},
    scripts: Record<string, never> = {},
    options: RedlockOptions = {},
  ) {
    super();
    // node-redlock's: an 'error' event must never crash the process.
    this.on('error', () => {});
    this.clients = new Set(clients);
    if (this.clients.size === 0) throw new Error('Redlock must be instantiated with at least one redis client.');
    const custom = Object.keys(scripts ?? {});
    if (custom.length > 0) {
      throw new Error(`Redlock: custom scripts (${custom.join(', ')}) are not supported: the engine's scripts keep fair queues and fencing that node-redlock's do not`);
    }
    this.settings = withDefaults(settings, DEFAULT_SETTINGS);
    this.#clients = [...this.clients];
    this.engine = new Engine(this.#clients as unknown as Redis[], { ...COMPATIBLE_OPTIONS, driftFactor: this.settings.driftFactor, ...options });
  }

  /** Closes the engine and runs `quit()` on every client. */
  public async quit(): Promise<void> {
    this.engine.close();
    await Promise.all([...this.clients].map((client) => client.quit()));
  }

  /**
   * Locks every resource for `duration` ms, in up to `retryCount + 1` rounds `retryDelay` ±
   * `retryJitter` ms apart. Rejects with ExecutionError when no round reached a quorum.
   */
  public async acquire(resources: string[], duration: number, settings?: Partial<Settings>): Promise<Lock> {
    checkDuration(duration);
    const call = settings ? withDefaults(settings, this.settings) : this.settings;
    await this.#identified();
    const attempts: Promise<ExecutionStats>[] = [];
    for (;;) {
      const startedAt = Date.now();
      try {
        // One round, no place in the masters' queues: node-redlock's callers poll.
        const lock = await this.engine.acquire(resources, duration, { retryCount: 0 });
        attempts.push(...this.#stats(lock.rounds, resources.length));
        return new Lock(this, resources, lock.token, attempts, expirationOf(lock, startedAt, duration, call.driftFactor), lock);
      } catch (error) {
        if (!(error instanceof QuorumError)) throw error;
        attempts.push(...this.#stats(error.rounds, resources.length));
      }
      if (!(await this.#pauseBeforeRetry(attempts.length, call))) {
        throw new ExecutionError('The operation was unable to achieve a quorum during its retry window.', attempts);
      }
    }
  }

  /**
   * Releases the lock on every master that still holds it. Never rejects for a lock that expired
   * or was taken over meanwhile (node-redlock does): releasing what is not ours is harmless, and
   * the keys are someone else's or nobody's already.
   */
  public async release(lock: Lock, _settings?: Partial<Settings>): Promise<ExecutionResult> {
    lock.expiration = 0;
    const result = await lock.lock.release();
    return { attempts: this.#stats(result.nodes.length > 0 ? [result.nodes] : [], lock.resources.length) };
  }

  /**
   * Extends a valid lock to `duration` ms from now; the Lock returned replaces `existing`, whose
   * `expiration` becomes 0. Rounds that find too few masters are retried as `acquire`'s are while
   * the lock is valid; a lock that another owner holds now is not retried (it is lost).
   */
  public async extend(existing: Lock, duration: number, settings?: Partial<Settings>): Promise<Lock> {
    checkDuration(duration);
    if (existing.expiration < Date.now()) throw new ExecutionError('Cannot extend an already-expired lock.', []);
    const call = settings ? withDefaults(settings, this.settings) : this.settings;
    const attempts: Promise<ExecutionStats>[] = [];
    for (;;) {
      const startedAt = Date.now();
      try {
        await existing.lock.extend(duration);
        attempts.push(...this.#stats([existing.lock.lastExtension ?? []], existing.resources.length));
        existing.expiration = 0;
        return new Lock(this, existing.resources, existing.value, attempts, expirationOf(existing.lock, startedAt, duration, call.driftFactor), existing.lock);
      } catch (error) {
        const nodes = error instanceof QuorumError || error instanceof LockLostError ? error.nodes : undefined;
        if (!nodes) throw error;
        attempts.push(...this.#stats([nodes], existing.resources.length));
        if (error instanceof LockLostError || existing.lock.remainingMs() <= 0) {
          throw new ExecutionError('The operation was unable to achieve a quorum during its retry window.', attempts);
        }
      }
      if (!(await this.#pauseBeforeRetry(attempts.length, call))) {
        throw new ExecutionError('The operation was unable to achieve a quorum during its retry window.', attempts);
      }
    }
  }

  /**
   * Runs `routine` under a lock that is extended when `automaticExtensionThreshold` ms of it are
   * left, and released when the routine settles. The signal aborts, with the reason in
   * `signal.error`, when an extension fails for good or the lock's validity runs out (a process
   * stalled past it, say): work after that is no longer under the lock.
   */
  public async using<T>(resources: string[], duration: number, settings: Partial<Settings>, routine?: (signal: RedlockAbortSignal) => Promise<T>): Promise<T>;
  /** `using` with this Redlock's settings. */
  public async using<T>(resources: string[], duration: number, routine: (signal: RedlockAbortSignal) => Promise<T>): Promise<T>;
  public async using<T>(
    resources: string[],
    duration: number,
    settingsOrRoutine: undefined | Partial<Settings> | ((signal: RedlockAbortSignal) => Promise<T>),
    optionalRoutine?: (signal: RedlockAbortSignal) => Promise<T>,
  ): Promise<T> {
    checkDuration(duration);
    const settings = settingsOrRoutine && typeof settingsOrRoutine !== 'function' ? withDefaults(settingsOrRoutine, this.settings) : this.settings;
    const routine = optionalRoutine ?? settingsOrRoutine;
    if (typeof routine !== 'function') throw new Error('INVARIANT: routine is not a function.');
    if (settings.automaticExtensionThreshold > duration - 100) {
      throw new Error('A lock `duration` must be at least 100ms greater than the `automaticExtensionThreshold` setting.');
    }
    let lock = await this.acquire(resources, duration, settings);
    const held = lock.lock;
    const controller = new AbortController();
    const signal = controller.signal as RedlockAbortSignal;
    const abort = (error: unknown) => {
      if (signal.aborted) return;
      signal.error = error instanceof Error ? error : new Error(String(error));
      controller.abort(signal.error);
    };
    // The engine's lock knows when its validity ends, whatever the wall clock says.
    const onLost = () => abort(held.signal.reason);
    held.signal.addEventListener('abort', onLost, { once: true });
    let timer: NodeJS.Timeout | undefined;
    let extension: Promise<void> | undefined;
    const queue = () => {
      const due = lock.expiration - Date.now() - settings.automaticExtensionThreshold;
      // Beyond a timer's reach (about 24.8 days): look again then.
      timer = setTimeout(() => (due > MAX_TIMER_MS ? queue() : (extension = extend())), Math.min(MAX_TIMER_MS, Math.max(0, due)));
    };
    const extend = async (): Promise<void> => {
      timer = undefined;
      try {
        lock = await lock.extend(duration);
        queue();
      } catch (error) {
        abort(error);
      }
    };
    queue();
    try {
      return await routine(signal);
    } finally {
      clearTimeout(timer);
      held.signal.removeEventListener('abort', onLost);
      await extension?.catch(() => {});
      await lock.release();
    }
  }

  /**
   * The engine asks each master who it is before its first vote, and a round is decided once a
   * majority answered: a master identified late gets its request after commands the app sends it
   * meanwhile, which node-redlock callers may read right after `acquire` (the key would not be
   * there yet). So the first call waits for every master to be identified, at most
   * IDENTIFY_WAIT_MS (3 s) for a silent one. Two clients of one server are refused here, once for all.
   */
  #identified(): Promise<void> {
    this.#ready ??= Promise.race([this.engine.verifyMasters(), sleep(IDENTIFY_WAIT_MS, undefined, { ref: false })]).catch((error: unknown) => {
      if (error instanceof InvalidArgumentError) throw error;
      // A master that does not answer is the rounds' business, as for any call.
    });
    return this.#ready;
  }

  /** Waits before the next round, if `rounds` leaves another: false when the retry window is over. */
  async #pauseBeforeRetry(rounds: number, settings: Settings): Promise<boolean> {
    const maxRounds = settings.retryCount === -1 ? Number.POSITIVE_INFINITY : settings.retryCount + 1;
    if (rounds >= maxRounds) return false;
    await sleep(Math.max(0, settings.retryDelay + Math.floor((Math.random() * 2 - 1) * settings.retryJitter)));
    return true;
  }

  /** Each round's votes; the 'error' event for every master against, as node-redlock emits it. */
  #stats(rounds: readonly RoundOutcomes[], resources: number): Promise<ExecutionStats>[] {
    return rounds.map((outcomes) => {
      const stats = statsOf(outcomes, this.#clients, resources);
      for (const error of stats.votesAgainst.values()) this.emit('error', error);
      return resolved(stats);
    });
  }
}

// node-redlock's default export. Named too: importing CommonJS, Node's ESM loader finds only named exports it can read.
export default Redlock;

const MAX_TIMER_MS = 2 ** 31 - 1;
/**
 * How long the first call waits for a master that does not say who it is. A Cluster voter's
 * identification (its nodes, its slots' owners, the scripts on each master) took over a second
 * on a 2-core machine running two test suites.
 */
const IDENTIFY_WAIT_MS = 3_000;

function resolved(stats: ExecutionStats): Promise<ExecutionStats> {
  return Promise.resolve(stats);
}

function checkDuration(duration: number): void {
  if (Math.floor(duration) !== duration) throw new Error('Duration must be an integer value in milliseconds.');
}

function withDefaults(settings: Partial<Settings>, base: Settings): Settings {
  const pick = (name: keyof Settings) => (typeof settings[name] === 'number' ? settings[name] : base[name]);
  return {
    driftFactor: pick('driftFactor'),
    retryCount: pick('retryCount'),
    retryDelay: pick('retryDelay'),
    retryJitter: pick('retryJitter'),
    automaticExtensionThreshold: pick('automaticExtensionThreshold'),
  };
}

/**
 * node-redlock's `expiration`: when the round started, plus the duration, less the drift (the
 * call's drift factor and 2 ms); never later than the engine's own measure of the validity,
 * taken on a monotonic clock from before the round.
 */
function expirationOf(lock: EngineLock, startedAt: number, duration: number, driftFactor: number): number {
  const drift = Math.round(driftFactor * duration) + 2;
  return Math.min(startedAt + duration - drift, Date.now() + lock.remainingMs());
}
