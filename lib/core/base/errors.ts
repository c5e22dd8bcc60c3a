import { roundResumesInMs, type NodeOutcome } from './node-outcome.js';

/** The stable `code` of each `RedlockError` subclass: match on it across package copies, or send it to a client. */
export type RedlockErrorCode =
  | 'LOCK_HELD'
  | 'QUORUM_UNREACHABLE'
  | 'LOCK_LOST'
  | 'EXTENSION_LIMIT'
  | 'INVALID_ARGUMENT'
  | 'ACQUIRE_ABORTED'
  | 'LOCK_KIND_MISMATCH'
  | 'LOCK_UPGRADE'
  | 'PERMISSION_DENIED';

/** Base class of every error this library throws; `code` is stable across versions. */
export abstract class RedlockError extends Error {
  /** Which error this is, stable across versions and package copies (`instanceof` is not). */
  abstract readonly code: RedlockErrorCode;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

export function isFailure(status: NodeOutcome['status']): boolean {
  return status === 'error' || status === 'timeout' || status === 'quarantined';
}

/** Resource names for a message: a lock may cover a thousand, a message names a few. */
function names(resources: readonly string[]): string {
  const shown = resources.slice(0, MAX_NAMED).join(', ');
  return resources.length > MAX_NAMED ? `${shown} and ${resources.length - MAX_NAMED} more` : shown;
}

const MAX_NAMED = 5;

function describe(outcomes: readonly NodeOutcome[]): string {
  return outcomes.map((o) => (o.error ? `${o.node} ${o.status} (${o.error})` : `${o.node} ${o.status}`)).join(', ');
}

/** What every master did in one round, in the order the masters were given to the engine. */
export type RoundOutcomes = readonly NodeOutcome[];

/**
 * The masters did not grant a quorum: LockHeldError or QuorumUnreachableError, with what each
 * master answered in the last round (`nodes`) and in every round of the call (`rounds`).
 */
export abstract class QuorumError extends RedlockError {
  #rounds: readonly RoundOutcomes[] | undefined;

  /** What every master did in the last round; errors are free of credentials. Empty when no round was sent. */
  abstract readonly nodes: RoundOutcomes;

  /**
   * What every master did in each round of the call that failed, oldest first, the last one
   * `nodes` (node-redlock's `attempts`). A master still answering when the call gave up shows
   * `pending`, and its outcome lands here when it answers. Empty when no round was sent.
   */
  get rounds(): readonly RoundOutcomes[] {
    return this.#rounds ?? (this.nodes.length > 0 ? [this.nodes] : []);
  }

  /** @internal The acquire call's earlier rounds and this one, as it gives up. */
  recordRounds(rounds: readonly RoundOutcomes[]): void {
    this.#rounds = rounds;
  }
}

/** Another owner holds the resource on enough masters that a quorum is impossible. */
export class LockHeldError extends QuorumError {
  /** Always `'LOCK_HELD'`. */
  readonly code = 'LOCK_HELD';

  constructor(
    /** The resources asked for. */
    readonly resources: readonly string[],
    /** Names of the masters that refused because another token holds the key. */
    readonly refusedBy: readonly string[],
    /** Rounds tried before giving up. */
    readonly attempts: number,
    /** Longest remaining ttl of the blocking keys, when the masters reported it. */
    readonly retryAfterMs: number | undefined,
    /** What every master did in the last round (empty when refused without asking them: held in this process). */
    readonly nodes: RoundOutcomes = [],
  ) {
    super(
      `lock on ${names(resources)} is held by another owner (refused by ${refusedBy.join(', ')}; ` +
        `${attempts} attempt${attempts === 1 ? '' : 's'})`,
    );
  }
}

/** Not enough masters answered (errors, timeouts, restart quarantine) or the grant came too late to be valid. */
export class QuorumUnreachableError extends QuorumError {
  /** Always `'QUORUM_UNREACHABLE'`. */
  readonly code = 'QUORUM_UNREACHABLE';
  /**
   * Set when masters in restart quarantine are what is missing: in how many ms enough of them
   * vote again for a quorum (with the masters that answered). Undefined for masters that are down.
   */
  readonly retryAfterMs: number | undefined;

  constructor(
    /** The resources asked for. */
    readonly resources: readonly string[],
    /** Masters a lock needs: a majority of them. */
    readonly quorum: number,
    /** What every master did in the last round; errors are free of credentials. */
    readonly nodes: RoundOutcomes,
    /** Why, when it is not the masters' answers (a grant that came too late to be valid, say). */
    readonly detail?: string,
  ) {
    const granted = nodes.filter((o) => o.status === 'granted').length;
    const resumesInMs = detail === undefined ? roundResumesInMs(nodes, quorum) : undefined;
    super(
      `quorum of ${quorum} unreachable for ${names(resources)}: ${granted} granted; ` +
        `${detail ? `${detail}; ` : ''}${resumesInMs === undefined ? '' : `${quarantineText(nodes, resumesInMs)}; `}${describe(nodes)}`,
    );
    this.retryAfterMs = resumesInMs;
  }

  /** The masters that failed, timed out or were in restart quarantine, as opposed to those that answered. */
  get failedNodes(): string[] {
    return this.nodes.filter((o) => isFailure(o.status)).map((o) => o.node);
  }
}

/** The lock is no longer held: it expired, was released, or a majority no longer has our token. */
export class LockLostError extends RedlockError {
  /** Always `'LOCK_LOST'`. */
  readonly code = 'LOCK_LOST';

  constructor(
    /** The resources of the lost lock. */
    readonly resources: readonly string[],
    /** What happened: refused by a majority, validity ran out, released. */
    readonly reason: string,
    /** What every master said, when a round found the loss. */
    readonly nodes: readonly NodeOutcome[] = [],
  ) {
    super(`lock on ${names(resources)} lost: ${reason}${nodes.length ? ` (${describe(nodes)})` : ''}`);
  }
}

/** The lock reached `maxExtensions`; it stays valid until its current deadline, then it is gone. */
export class ExtensionLimitError extends RedlockError {
  /** Always `'EXTENSION_LIMIT'`. */
  readonly code = 'EXTENSION_LIMIT';

  constructor(
    /** The resources of the lock. */
    readonly resources: readonly string[],
    /** The `maxExtensions` option that was reached. */
    readonly maxExtensions: number,
  ) {
    super(`lock on ${names(resources)} reached its limit of ${maxExtensions} extensions`);
  }
}

/**
 * A call or option the engine refuses before doing anything (a ttl out of range, an empty
 * resource list, an option of the wrong type); `argument` names it and `value` is what was given.
 */
export class InvalidArgumentError extends RedlockError {
  /** Always `'INVALID_ARGUMENT'`. */
  readonly code = 'INVALID_ARGUMENT';

  constructor(
    /** The argument or option refused, as the caller named it (`ttlMs`, `options.keyPrefix`). */
    readonly argument: string,
    /** What was given. */
    readonly value: unknown,
    expectation: string,
  ) {
    super(`invalid ${argument}: ${formatValue(value)} (${expectation})`);
  }
}

/** What one master's user may not run of what the engine needs: `PermissionDeniedError.denied`. */
export interface DeniedCommands {
  /** The master, by host and port. */
  readonly node: string;
  /** The commands refused (NOPERM), with the key prefix or channel for those limited by one. */
  readonly commands: readonly string[];
}

/**
 * The Redis user of some masters may not run a command the engine needs (an ACL refused it with
 * NOPERM): `redlock.verifyPermissions()`, which the Nest module runs at bootstrap. Names each
 * master and command, never the user's credentials.
 */
export class PermissionDeniedError extends RedlockError {
  /** Always `'PERMISSION_DENIED'`. */
  readonly code = 'PERMISSION_DENIED';

  constructor(
    /** Per master, what its user may not run. */
    readonly denied: readonly DeniedCommands[],
  ) {
    const each = denied.map(({ node, commands }) => `${node}: ${commands.join(', ')}`).join('; ');
    super(`the Redis user may not run what the engine needs (docs/production.md, "A Redis user with the least privilege"): ${each}`);
  }
}

/** The caller's AbortSignal fired while waiting for the lock; nothing is held. */
export class AcquireAbortedError extends RedlockError {
  /** Always `'ACQUIRE_ABORTED'`. */
  readonly code = 'ACQUIRE_ABORTED';

  constructor(
    /** The resources that were being waited for. */
    readonly resources: readonly string[],
    reason: unknown,
  ) {
    super(`acquiring ${names(resources)} was aborted`, { cause: reason });
  }
}

/**
 * A resource is used as two kinds of lock at once: a semaphore of one `limit` here and of another
 * there, or a semaphore and a plain / read-write lock. Merging them would break both promises.
 */
export class LockKindMismatchError extends RedlockError {
  /** Always `'LOCK_KIND_MISMATCH'`. */
  readonly code = 'LOCK_KIND_MISMATCH';

  constructor(
    /** The resource used as two kinds. */
    readonly resource: string,
    /** What this call asked for: `'lock'` (plain, read or write: one family) or `'limit N'`. */
    readonly requested: string,
    /** What holds the resource: `'lock'`, `'read'` or `'limit N'`. */
    readonly found: string,
  ) {
    super(`resource ${JSON.stringify(resource)} is used as ${found} and was asked for as ${requested}: a resource has one limit and one lock family`);
  }
}

/**
 * A write lock asked for inside work that holds only a read lock on the resource: waiting for the
 * readers to leave would wait for itself. Release the read lock and acquire the write lock instead.
 */
export class LockUpgradeError extends RedlockError {
  /** Always `'LOCK_UPGRADE'`. */
  readonly code = 'LOCK_UPGRADE';

  constructor(
    /** The resources the write lock (or the larger weight of permits) was asked for. */
    readonly resources: readonly string[],
    /** For weighted permits: how many were asked for inside a hold of how many, of which limit. */
    permits?: { readonly asked: number; readonly held: number; readonly limit: number },
  ) {
    super(
      permits
        ? `${permits.asked} permits of limit ${permits.limit} on ${names(resources)} asked for inside a hold of ${permits.held} of them: taking more permits inside a hold is refused (it could deadlock)`
        : `write lock on ${names(resources)} asked for inside a read lock on it: upgrading a read lock is refused (it would deadlock)`,
    );
  }
}

/** Which masters are in restart quarantine and when a quorum can vote again, on the wall clock. */
function quarantineText(outcomes: readonly NodeOutcome[], resumesInMs: number): string {
  const quarantined = outcomes.filter((o) => o.status === 'quarantined').map((o) => `${o.node} for ${o.quarantinedForMs} ms`);
  const at = new Date(Date.now() + resumesInMs).toISOString();
  return `restart quarantine (${quarantined.join(', ')}): a quorum can vote again in ${resumesInMs} ms, at ${at}`;
}

/** A value as an error shows it: strings quoted, numbers as they are, objects only by their type (they may hold secrets). */
export function formatValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value);
  if (Array.isArray(value)) return `array of ${value.length}`;
  return typeof value;
}
