import { Logger } from '@nestjs/common';
import { hostname } from 'node:os';
import { DEFAULT_LEASE_MS } from './core/election/election.js';
import { formatValue, InvalidArgumentError } from './core/base/errors.js';
import { resolveOptions, type RedlockLogger, type RedlockOptions } from './core/lock/redlock-options.js';
import { MAX_DELAY_MS, MAX_TTL_MS } from './core/base/argument-checks.js';
import { DEFAULT_TTL_MS } from './redlock.constants.js';
import type { DefaultWait, LeadershipOptions, OnLocked, RedlockClientLibrary, RedlockErrorMapper, RedlockModuleOptions, RedlockNode } from './redlock.interfaces.js';
import { RedlockConfigError } from './errors/redlock-config.error.js';

/** The module options, validated, with defaults filled in. */
export interface RedlockSettings {
  readonly nodes: readonly RedlockNode[];
  /** The library masters given by URL are connected with. */
  readonly client: RedlockClientLibrary;
  /** What the engine receives: every core option, with warnings routed to Nest's logger. */
  readonly engine: RedlockOptions;
  readonly defaultTtlMs: number;
  /** The engine's cap on a ttl (its `maxTtlMs`). */
  readonly maxTtlMs: number;
  readonly defaultWait: Readonly<Required<Pick<DefaultWait, 'onLocked'>> & Pick<DefaultWait, 'waitTimeoutMs'>>;
  readonly errorMapper: RedlockErrorMapper | undefined;
  /** Who this replica is in elections, and their lease. */
  readonly leadership: { readonly identity: string; readonly leaseMs: number };
}

/**
 * Checks everything that can be checked without a network, before any connection is opened,
 * so a bad configuration fails at bootstrap with a message naming the option.
 */
export function resolveSettings(options: RedlockModuleOptions | undefined): RedlockSettings {
  if (!options || typeof options !== 'object') {
    throw new RedlockConfigError('RedlockModule: options are required (at least options.nodes)');
  }
  const { nodes, client = 'ioredis', defaultTtlMs = DEFAULT_TTL_MS, defaultWait = {}, errorMapper, leadership = {}, ...engine } = options;
  if (!Array.isArray(nodes) || nodes.length === 0) {
    throw new RedlockConfigError('RedlockModule: options.nodes must list at least one Redis master');
  }
  if (client !== 'ioredis' && client !== 'node-redis') {
    throw new RedlockConfigError(`RedlockModule: options.client must be 'ioredis' or 'node-redis' (got ${formatValue(client)})`);
  }
  // A bad maxTtlMs is reported by the engine's own checks below.
  const maxTtlMs = typeof engine.maxTtlMs === 'number' ? engine.maxTtlMs : MAX_TTL_MS;
  if (!isTtl(defaultTtlMs, maxTtlMs)) {
    throw new RedlockConfigError(
      `RedlockModule: options.defaultTtlMs must be a positive integer number of ms, at most ${maxTtlMs} as maxTtlMs allows ` +
        `(got ${formatValue(defaultTtlMs)})`,
    );
  }
  if (defaultWait === null || typeof defaultWait !== 'object') {
    throw new RedlockConfigError("RedlockModule: options.defaultWait must be an object like { onLocked: 'wait' }");
  }
  // Left out (undefined) is the default; null is a value, and a wrong one.
  const onLocked = defaultWait.onLocked === undefined ? 'wait' : defaultWait.onLocked;
  checkOnLocked('RedlockModule: options.defaultWait.onLocked', onLocked, ['wait', 'fail']);
  if (defaultWait.waitTimeoutMs !== undefined) {
    checkWaitTimeout('RedlockModule: options.defaultWait.waitTimeoutMs', defaultWait.waitTimeoutMs);
  }
  if (errorMapper !== undefined && typeof errorMapper !== 'function') {
    throw new RedlockConfigError('RedlockModule: options.errorMapper must be a function');
  }
  const leadershipSettings = resolveLeadership(leadership, typeof engine.maxTtlMs === 'number' ? engine.maxTtlMs : MAX_TTL_MS);
  const engineOptions: RedlockOptions = { ...engine, logger: engine.logger === undefined ? new Logger('Redlock') : engine.logger };
  try {
    resolveOptions(engineOptions);
  } catch (error) {
    if (error instanceof InvalidArgumentError) {
      throw new RedlockConfigError(`RedlockModule: ${error.message.replace(/^invalid /, 'invalid options.')}`);
    }
    throw error;
  }
  return {
    nodes,
    client,
    engine: engineOptions,
    defaultTtlMs,
    maxTtlMs,
    defaultWait: { onLocked, waitTimeoutMs: defaultWait.waitTimeoutMs },
    errorMapper,
    leadership: leadershipSettings,
  };
}

function resolveLeadership(leadership: unknown, maxTtlMs: number): RedlockSettings['leadership'] {
  if (leadership === null || typeof leadership !== 'object') {
    throw new RedlockConfigError("RedlockModule: options.leadership must be an object like { identity: 'pod-a', leaseMs: 10000 }");
  }
  const { identity = `${hostname()}:${process.pid}`, leaseMs = DEFAULT_LEASE_MS } = leadership as LeadershipOptions;
  if (typeof identity !== 'string' || identity.length === 0 || identity.length > 256 || identity.includes('\n')) {
    throw new RedlockConfigError(`RedlockModule: options.leadership.identity must be 1 to 256 characters without a line break (got ${formatValue(identity)})`);
  }
  if (!isTtl(leaseMs, maxTtlMs)) {
    throw new RedlockConfigError(
      `RedlockModule: options.leadership.leaseMs must be a positive integer number of ms, at most ${maxTtlMs} (got ${formatValue(leaseMs)})`,
    );
  }
  return { identity, leaseMs };
}

export function isTtl(value: unknown, maxTtlMs = MAX_TTL_MS): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 && value <= maxTtlMs;
}

/** Checks a wait policy against the ones allowed where it is set (a module default cannot skip). */
export function checkOnLocked(label: string, value: unknown, allowed: readonly OnLocked[] = ['wait', 'fail', 'skip']): void {
  if (!allowed.includes(value as OnLocked)) {
    const choices = allowed.map((policy) => `'${policy}'`);
    throw new RedlockConfigError(
      `${label} must be ${choices.slice(0, -1).join(', ')} or ${choices.at(-1)} (got ${formatValue(value)})`,
    );
  }
}

/** As the engine checks a wait, so that a wait it would refuse on every call fails at bootstrap instead. */
export function checkWaitTimeout(label: string, value: unknown): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > MAX_DELAY_MS) {
    throw new RedlockConfigError(`${label} must be a finite number of ms >= 0, at most ${MAX_DELAY_MS} (got ${formatValue(value)})`);
  }
}

/** The logger's `debug`, when it has one (Nest's Logger does; a plain `{ warn }` does not). */
export function debugOf(logger: RedlockLogger | undefined): ((message: string) => void) | undefined {
  const candidate = logger as { debug?: (message: string) => void } | undefined;
  return typeof candidate?.debug === 'function' ? (message) => candidate.debug!(message) : undefined;
}
