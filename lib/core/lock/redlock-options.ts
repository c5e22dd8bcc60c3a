import { checkCount, checkDelay, checkFlag, checkPositiveInteger, isDelay, MAX_DELAY_MS, MAX_TTL_MS } from '../base/argument-checks.js';
import { InvalidArgumentError } from '../base/errors.js';
import type { RedlockInstrumentation } from './instrumentation.js';

/**
 * How the engine tells which server a master is and how long its keys have existed, for the
 * restart quarantine and for telling two names of one master apart: `'info'` (INFO's run_id,
 * uptime and replication state: sees every restart and every failover to a replica) or
 * `'marker'` (a key the engine keeps on each master, for an ACL user that may not run INFO: sees
 * a master that lost its keys, not one that reloaded an older snapshot, nor a failover).
 */
export type IdentifyBy = 'info' | 'marker';

/** Followed by a process id: the channel on which the masters wake that process's queue heads. */
export const WAKE_CHANNEL_PREFIX = 'redlock-wake:';

/** Where the engine writes its warnings (a Nest `Logger`, `console`, anything with `warn`). */
export interface RedlockLogger {
  /** One warning, already free of credentials. */
  warn(message: string): void;
}

/** How a caller waits for a lock that is held elsewhere. */
export interface WaitOptions {
  /** Extra rounds after the first one. Default: unlimited within `waitTimeoutMs`. */
  retryCount?: number;
  /** Total time to keep trying, in ms. Default 10 000. */
  waitTimeoutMs?: number;
  /** Base pause between rounds, in ms. Default 50. */
  retryDelayMs?: number;
  /** Random extra pause, uniform in [0, retryJitterMs], so contenders fall out of step. Default 50. */
  retryJitterMs?: number;
}

/**
 * How a resource's lock key is named on the masters: `'prefixed'` (`keyPrefix` + resource), or
 * `'node-redlock'`: the resource itself, as node-redlock (`redlock` on npm) names it, so that
 * processes on either library exclude each other while a fleet switches over (docs/migration.md).
 */
export type KeyFormat = 'prefixed' | 'node-redlock';

/** The engine's options (`new Redlock(clients, options)`, or `RedlockModule.forRoot`): every one optional. */
export interface RedlockOptions extends WaitOptions {
  /** Prepended to every resource name to form the Redis key. Default `"redlock:"`. Not with `keyFormat: 'node-redlock'`. */
  keyPrefix?: string;
  /**
   * `'node-redlock'` names a lock key as node-redlock does, the bare resource, for a fleet that
   * runs both libraries during a switch; the queue, fence and holder keys keep their prefixes.
   * Releases by node-redlock processes wake nobody, so waiters then also look again every
   * `retryDelayMs` (with jitter) while a lock is held. A resource that begins with one of the
   * engine's prefixes is refused. Default `'prefixed'`.
   */
  keyFormat?: KeyFormat;
  /**
   * The longest ttl a lock may be given or extended to, in ms. Default 24 h (MAX_TTL_MS), which
   * catches a ttl given in the wrong unit. Raise it knowingly: a holder that crashes blocks its
   * resources for the whole ttl, and the restart quarantine (`'max-ttl'`) keeps a restarted
   * master out for as long as the longest ttl used (docs/production.md).
   */
  maxTtlMs?: number;
  /** Share of the ttl allowed for clock drift between this process and the masters. Default 0.01. */
  driftFactor?: number;
  /**
   * How long one round waits for the masters before counting the silent ones as failed, in ms.
   * Time this process was too busy to read their replies does not count (a deadline timer that
   * fires late is moved by as long as it was late, up to half the ttl in all). Default: 10% of
   * the ttl, at most 1 000 ms and at least 1 ms. What it costs: a master that stays silent (a
   * paused server, a partition; not a refused connection, which fails at once) delays only the
   * rounds the others cannot decide alone, by up to this long, and a silent majority is reported
   * (QuorumUnreachableError) after three rounds, about 3 s with locks of 10 s or more.
   */
  nodeTimeoutMs?: number;
  /** How many times one lock may be extended; unbounded extension would defeat expiry. Default 1000. */
  maxExtensions?: number;
  /**
   * How many resources one lock may cover. A lock over more is refused with InvalidArgumentError
   * before anything is sent: every resource costs keys and script work on every master, within
   * the node timeout. Default 1000.
   */
  maxResources?: number;
  /** Where warnings go (an even number of masters, a master in restart quarantine). Default `console`. */
  logger?: RedlockLogger;
  /**
   * Give every lock a fencing token (`lock.fence`), strictly increasing per resource. Costs a
   * second round trip per acquisition. Can also be asked per call. Default false.
   */
  fencing?: boolean;
  /** Prefix of the fence counter keys, kept apart from lock keys. Default `"redlock-fence:"`. */
  fenceKeyPrefix?: string;
  /** Prefix of the per-resource waiter queues that make waiting fair. Default `"redlock-queue:"`. */
  queueKeyPrefix?: string;
  /** Prefix of the per-resource hashes of readers and permit holders (`mode: 'read'`, `limit`). Default `"redlock-holders:"`. */
  holdersKeyPrefix?: string;
  /** Prefix of the keys that say who leads an election (`redlock.election()`) and in which term. Default `"redlock-leader:"`. */
  leaderKeyPrefix?: string;
  /**
   * Wake waiters the moment a lock is released (one subscriber connection per master per
   * engine, opened on first contention) instead of polling. Default true.
   */
  wakeups?: boolean;
  /**
   * A release that frees a key grants it to the first waiter in the masters' queue, so a turn
   * between processes costs no acquire round of the waiter's own (docs/GUARANTEES.md,
   * "Server-side hand-off"). For single-key, unfenced exclusive locks, with `wakeups` on and
   * masters given as plain connections (not Sentinel groups or Redis Clusters). Default true.
   */
  handOff?: boolean;
  /**
   * Raise every fencing token to at least the wall clock in microseconds, so tokens keep rising
   * if a master loses its counters (see docs). Default true; false gives small consecutive numbers.
   */
  fenceTimeFloor?: boolean;
  /**
   * How long a resource's fence counter stays on the masters after the ttl of the lock that
   * last raised it, in ms; then it expires, so fencing per order or per user does not fill
   * Redis. Tokens keep rising across an expiry through the time floor, provided client wall
   * clocks agree to within ttl + this (see docs/GUARANTEES.md). With `fenceTimeFloor: false`
   * counters are kept for ever: they alone keep tokens rising then. Default 60 000.
   */
  fenceRetentionMs?: number;
  /**
   * A master that restarted (new run_id, or up for less than this) has forgotten its keys: its
   * votes do not count until it has been up this long. Default `'max-ttl'`: the longest ttl this
   * engine has used. `false` turns the check off (only do that with masters on
   * `appendfsync always`, or in tests of fresh servers).
   */
  restartQuarantineMs?: number | 'max-ttl' | false;
  /**
   * Whether a master that is already young when this engine first sees it waits out the restart
   * quarantine too: it may have restarted just before, forgetting other processes' locks. Default
   * true. `false` quarantines only what this engine sees happen (a master's run_id changing, a
   * failover) and trusts every master at first sight: for fleets moving from node-redlock, whose
   * long durations would keep young masters out for that long (docs/from-node-redlock.md). A
   * master that restarted before this engine started then votes at once.
   */
  quarantineAtFirstSight?: boolean;
  /**
   * How the engine tells which server each master is and how long its keys have existed (for the
   * restart quarantine and duplicate masters). `'info'` (default): INFO's run_id, uptime and
   * replication state. `'marker'`: for an ACL user that may not run INFO, a key the engine keeps
   * on each master (the bare `fenceKeyPrefix`) with a random id and when it was written; it sees
   * a master that lost its keys (restarted without persistence, replaced by an empty server), not
   * one that reloaded an older snapshot, nor a failover to a replica, so Sentinel groups and Redis
   * Cluster voters are refused with it (docs/production.md, "Without INFO").
   */
  identifyBy?: IdentifyBy;
  /**
   * Count a master's vote for a lock, an extension or a fence only once this many of its
   * replicas acknowledged the write (Redis `WAIT`, sent right behind it, bounded by the round's
   * node timeout): for masters managed by Sentinel, so that a failover to a replica that
   * acknowledged loses no granted lock. Releases do not wait. Default 0 (off).
   */
  replicaAcks?: number;
  /**
   * Hooks for metrics and traces, called as locks are taken, held, extended, lost and released
   * (`new RedlockTelemetry()` from `nestjs-redlock/opentelemetry`, or your own). Default: none.
   */
  instrumentation?: RedlockInstrumentation;
}

export interface ResolvedRedlockOptions {
  readonly keyPrefix: string;
  readonly keyFormat: KeyFormat;
  readonly maxTtlMs: number;
  readonly driftFactor: number;
  readonly nodeTimeoutMs: number | undefined;
  readonly maxExtensions: number;
  readonly maxResources: number;
  readonly retryCount: number;
  readonly waitTimeoutMs: number;
  readonly retryDelayMs: number;
  readonly retryJitterMs: number;
  readonly logger: RedlockLogger;
  readonly fencing: boolean;
  readonly fenceKeyPrefix: string;
  readonly fenceTimeFloor: boolean;
  readonly fenceRetentionMs: number;
  readonly queueKeyPrefix: string;
  readonly holdersKeyPrefix: string;
  readonly leaderKeyPrefix: string;
  readonly wakeups: boolean;
  readonly handOff: boolean;
  /** A fixed window, `'max-ttl'` for the longest ttl used, or false for off. */
  readonly restartQuarantineMs: number | 'max-ttl' | false;
  readonly quarantineAtFirstSight: boolean;
  readonly identifyBy: IdentifyBy;
  readonly replicaAcks: number;
  readonly instrumentation: RedlockInstrumentation | undefined;
}


const DEFAULTS = {
  keyPrefix: 'redlock:',
  fenceKeyPrefix: 'redlock-fence:',
  queueKeyPrefix: 'redlock-queue:',
  holdersKeyPrefix: 'redlock-holders:',
  leaderKeyPrefix: 'redlock-leader:',
  driftFactor: 0.01,
  maxExtensions: 1000,
  maxResources: 1000,
  retryCount: Number.POSITIVE_INFINITY,
  waitTimeoutMs: 10_000,
  retryDelayMs: 50,
  retryJitterMs: 50,
  fenceRetentionMs: 60_000,
} as const;

export function resolveOptions(options: RedlockOptions = {}): ResolvedRedlockOptions {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidArgumentError('options', options, 'expected an object of Redlock options');
  }
  const keyFormat = given(options.keyFormat, 'prefixed' as const);
  if (keyFormat !== 'prefixed' && keyFormat !== 'node-redlock') {
    throw new InvalidArgumentError('keyFormat', keyFormat, "expected 'prefixed' or 'node-redlock'");
  }
  if (keyFormat === 'node-redlock' && options.keyPrefix !== undefined) {
    throw new InvalidArgumentError('keyPrefix', options.keyPrefix, "keyFormat 'node-redlock' names a lock key by its resource alone: leave keyPrefix out");
  }
  const resolved = {
    // A node-redlock key is the bare resource.
    keyPrefix: keyFormat === 'node-redlock' ? '' : given(options.keyPrefix, DEFAULTS.keyPrefix),
    keyFormat,
    maxTtlMs: given(options.maxTtlMs, MAX_TTL_MS),
    driftFactor: given(options.driftFactor, DEFAULTS.driftFactor),
    nodeTimeoutMs: options.nodeTimeoutMs,
    maxExtensions: given(options.maxExtensions, DEFAULTS.maxExtensions),
    maxResources: given(options.maxResources, DEFAULTS.maxResources),
    logger: given(options.logger, console),
    fencing: given(options.fencing, false),
    fenceKeyPrefix: given(options.fenceKeyPrefix, DEFAULTS.fenceKeyPrefix),
    fenceTimeFloor: given(options.fenceTimeFloor, true),
    fenceRetentionMs: given(options.fenceRetentionMs, DEFAULTS.fenceRetentionMs),
    queueKeyPrefix: given(options.queueKeyPrefix, DEFAULTS.queueKeyPrefix),
    holdersKeyPrefix: given(options.holdersKeyPrefix, DEFAULTS.holdersKeyPrefix),
    leaderKeyPrefix: given(options.leaderKeyPrefix, DEFAULTS.leaderKeyPrefix),
    wakeups: given(options.wakeups, true),
    handOff: given(options.handOff, true),
    restartQuarantineMs: given(options.restartQuarantineMs, 'max-ttl' as const),
    quarantineAtFirstSight: given(options.quarantineAtFirstSight, true),
    identifyBy: given(options.identifyBy, 'info' as const),
    replicaAcks: given(options.replicaAcks, 0),
    instrumentation: options.instrumentation,
    ...resolveWait(options, DEFAULTS),
  };
  const quarantine = resolved.restartQuarantineMs;
  if (quarantine !== false && quarantine !== 'max-ttl' && !isDelay(quarantine)) {
    throw new InvalidArgumentError('restartQuarantineMs', quarantine, `expected a number of ms in [0, ${MAX_DELAY_MS}], 'max-ttl' or false (off)`);
  }
  if (resolved.identifyBy !== 'info' && resolved.identifyBy !== 'marker') {
    throw new InvalidArgumentError('identifyBy', resolved.identifyBy, "expected 'info' or 'marker'");
  }
  checkPrefixes(resolved);
  if (typeof resolved.driftFactor !== 'number' || !(resolved.driftFactor >= 0 && resolved.driftFactor < 0.5)) {
    throw new InvalidArgumentError('driftFactor', resolved.driftFactor, 'expected a number in [0, 0.5)');
  }
  const timeout = resolved.nodeTimeoutMs;
  // A round's timer: one longer than a timer can wait would fail every master after 1 ms.
  if (timeout !== undefined && !(isDelay(timeout) && Number.isInteger(timeout) && timeout > 0)) {
    throw new InvalidArgumentError('nodeTimeoutMs', timeout, `expected an integer number of ms in [1, ${MAX_DELAY_MS}]`);
  }
  checkCount('maxExtensions', resolved.maxExtensions);
  if (typeof resolved.maxTtlMs !== 'number' || !Number.isSafeInteger(resolved.maxTtlMs) || resolved.maxTtlMs <= 0) {
    throw new InvalidArgumentError('maxTtlMs', resolved.maxTtlMs, `expected an integer number of ms in [1, ${Number.MAX_SAFE_INTEGER}]`);
  }
  checkDelay('fenceRetentionMs', resolved.fenceRetentionMs);
  checkPositiveInteger('maxResources', resolved.maxResources);
  if (typeof resolved.replicaAcks !== 'number' || !Number.isSafeInteger(resolved.replicaAcks) || resolved.replicaAcks < 0) {
    throw new InvalidArgumentError('replicaAcks', resolved.replicaAcks, 'expected a whole number of replicas, 0 (off) or more');
  }
  const logger = resolved.logger as Partial<RedlockLogger> | null;
  if (logger === null || typeof logger !== 'object' || typeof logger.warn !== 'function') {
    throw new InvalidArgumentError('logger', resolved.logger, 'expected an object with a warn(message) method');
  }
  checkInstrumentation(resolved.instrumentation);
  for (const name of ['fencing', 'fenceTimeFloor', 'wakeups', 'handOff', 'quarantineAtFirstSight'] as const) checkFlag(name, resolved[name]);
  checkedWaits.add(resolved);
  return resolved;
}

/**
 * The engine's key names must never meet: if one prefix begins another, some resource's lock key
 * is another resource's queue or fence key (`keyPrefix: ''` and resource `redlock-queue:x` would
 * take over x's queue), or its release channel is a process's wake-up channel.
 */
function checkPrefixes(names: Pick<ResolvedRedlockOptions, 'keyFormat' | 'keyPrefix' | 'fenceKeyPrefix' | 'queueKeyPrefix' | 'holdersKeyPrefix' | 'leaderKeyPrefix'>): void {
  type Prefix = 'keyPrefix' | 'fenceKeyPrefix' | 'queueKeyPrefix' | 'holdersKeyPrefix' | 'leaderKeyPrefix' | 'wake-up channel';
  // A bare lock key (node-redlock's) has no prefix to collide: KeyNames refuses a resource in another prefix's space.
  const prefixes = names.keyFormat === 'node-redlock'
    ? (['fenceKeyPrefix', 'queueKeyPrefix', 'holdersKeyPrefix', 'leaderKeyPrefix'] as const)
    : (['keyPrefix', 'fenceKeyPrefix', 'queueKeyPrefix', 'holdersKeyPrefix', 'leaderKeyPrefix'] as const);
  for (const name of prefixes) {
    if (typeof names[name] !== 'string') throw new InvalidArgumentError(name, names[name], 'expected a string');
  }
  const value = (name: Prefix) => (name === 'wake-up channel' ? WAKE_CHANNEL_PREFIX : names[name]);
  // The one to blame: the option the caller set rather than a default, else the one that begins the other.
  const blame = (a: Prefix, b: Prefix): Prefix => {
    const set = (name: Prefix) => name !== 'wake-up channel' && names[name] !== DEFAULTS[name];
    if (set(a) !== set(b)) return set(a) ? a : b;
    return value(a).length <= value(b).length ? a : b;
  };
  const all: Prefix[] = [...prefixes, 'wake-up channel'];
  for (const [i, a] of all.entries()) {
    for (const b of all.slice(i + 1)) {
      if (!value(a).startsWith(value(b)) && !value(b).startsWith(value(a))) continue;
      const name = blame(a, b) as (typeof prefixes)[number];
      const other = name === a ? b : a;
      throw new InvalidArgumentError(
        name,
        names[name],
        `keys could collide with the ${other} prefix ${JSON.stringify(value(other))}: no prefix may begin another`,
      );
    }
  }
}

const INSTRUMENTATION_HOOKS = [
  'acquireStarted',
  'lockHeld',
  'lockReleased',
  'lockLost',
  'extensionEnded',
  'masterFailed',
  'callStarted',
  'leadershipWon',
  'leadershipEnded',
] as const satisfies readonly (keyof RedlockInstrumentation)[];

/** An object with at least one hook, each a function: a class passed without `new`, or a typo'd hook, fails here. */
function checkInstrumentation(value: unknown): void {
  if (value === undefined) return;
  const expected = `expected an object with hook methods (${INSTRUMENTATION_HOOKS.join(', ')}), such as new RedlockTelemetry()`;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidArgumentError('instrumentation', value, expected);
  }
  const hooks = value as Record<string, unknown>;
  const present = INSTRUMENTATION_HOOKS.filter((name) => hooks[name] !== undefined);
  if (present.length === 0) throw new InvalidArgumentError('instrumentation', value, expected);
  for (const name of present) {
    if (typeof hooks[name] !== 'function') {
      throw new InvalidArgumentError(`instrumentation.${name}`, hooks[name], 'expected a function');
    }
  }
}

/**
 * An option left out (undefined) takes its default; anything else given is checked as a value,
 * null included: null is no number, flag or string, and taking it as "the default" would hide
 * a configuration that did not say what it meant.
 */
function given<T, D>(value: T | undefined, fallback: D): T | D {
  return value === undefined ? fallback : value;
}

/**
 * Wait settings over a base: an engine's options over the defaults, validated here, or a call's
 * over its engine's, which checkCall validated where the call entered the engine.
 */
export function resolveWait(
  overrides: WaitOptions,
  base: Required<WaitOptions>,
): Required<WaitOptions> {
  const overridden =
    overrides.retryCount !== undefined ||
    overrides.waitTimeoutMs !== undefined ||
    overrides.retryDelayMs !== undefined ||
    overrides.retryJitterMs !== undefined;
  // Over an engine's own settings (checked when they were resolved): a call's. Only those:
  // other bases (the defaults) carry more than wait settings, and are spread by the caller.
  const overEngine = checkedWaits.has(base);
  if (!overridden && overEngine) return base;
  const wait = {
    retryCount: given(overrides.retryCount, base.retryCount),
    waitTimeoutMs: given(overrides.waitTimeoutMs, base.waitTimeoutMs),
    retryDelayMs: given(overrides.retryDelayMs, base.retryDelayMs),
    retryJitterMs: given(overrides.retryJitterMs, base.retryJitterMs),
  };
  if (overEngine) return wait;
  checkCount('retryCount', wait.retryCount);
  checkDelay('waitTimeoutMs', wait.waitTimeoutMs);
  checkDelay('retryDelayMs', wait.retryDelayMs);
  checkDelay('retryJitterMs', wait.retryJitterMs);
  return wait;
}

/** Wait settings known to be valid: an engine's resolved options. */
const checkedWaits = new WeakSet<Required<WaitOptions>>();

/**
 * The default node timeout's ceiling. 100 ms, the earlier ceiling, was shorter than healthy
 * masters take to answer on a loaded machine (replies of 300 to 650 ms seen with every master up
 * on two busy cores), and every such round counted as an outage.
 */
const MAX_DEFAULT_NODE_TIMEOUT_MS = 1_000;

/** How long a round with this ttl waits for the masters: the option, or 10% of the ttl within [1, 1000] ms. */
export function nodeTimeoutMs(options: ResolvedRedlockOptions, ttlMs: number): number {
  return options.nodeTimeoutMs ?? Math.max(1, Math.min(MAX_DEFAULT_NODE_TIMEOUT_MS, Math.round(ttlMs / 10)));
}
