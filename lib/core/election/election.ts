import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { checkTtl } from '../base/argument-checks.js';
import { AcquireAbortedError, InvalidArgumentError, LockHeldError, QuorumUnreachableError } from '../base/errors.js';
import type { AcquireOptions } from '../lock/acquire-options.js';
import type { InstrumentationGuard } from '../lock/instrumentation-guard.js';
import type { Lock } from '../lock/lock.js';
import type { LeaderInfo, LeaderRecords } from './leader-records.js';
import { Leadership, type LeadershipEnd } from './leadership.js';

/** An election's options (`redlock.election(name, options)`). */
export interface ElectionOptions {
  /**
   * How long a leader's lease lasts without renewal, in ms. The leader renews it when half is
   * left; a leader that dies without a word is replaced about this long after its last renewal.
   * Default 10 000.
   */
  leaseMs?: number;
}

/** Options of one `campaign`. */
export interface CampaignOptions {
  /** Stops campaigning: the campaign then rejects with AcquireAbortedError. Leadership already won is not given up. */
  signal?: AbortSignal;
}

/** What an election asks of its engine (Redlock, InMemoryRedlock): a waiting, fenced acquire, and the ttl cap. */
export interface ElectionEngine {
  acquire(resources: string, ttlMs: number, options: AcquireOptions): Promise<Lock>;
  readonly options: { readonly maxTtlMs: number };
}

/** The resource an election's lock is on: `election:<name>`. Do not lock it yourself. */
export const electionResource = (name: string) => `election:${name}`;

export const DEFAULT_LEASE_MS = 10_000;

/**
 * A campaign's acquire waits this long in the masters' queue before it enlists again: waiting
 * is driven by the leader's release (a wake-up) or by its lease's end (the refusal's ttl), never
 * by polling, so the budget only bounds how long a queue entry lives unrefreshed.
 */
const CAMPAIGN_WAIT_MS = 60_000;

/**
 * A named leadership over the engine's masters (etcd's Campaign / Resign / Observe): at most one
 * leader at a time, holding an exclusive fenced lock on `election:<name>` as its lease, renewed
 * while it lives. The leader's term is that lock's fencing token, so terms rise strictly from one
 * leader to the next and a store that checks them refuses a deposed leader's writes.
 *
 * Events: `'elected'` with the Leadership this process won; `'ended'` with a LeadershipEnd when
 * one of them ends (resigned, or lost: its renewal failed, or the process stalled past its lease).
 */
export class Election extends EventEmitter {
  /** The election's name. */
  readonly name: string;
  /** The lease, in ms. */
  readonly leaseMs: number;
  /** The resource its leader holds: `election:<name>`. */
  readonly resource: string;
  readonly #engine: ElectionEngine;
  /** Where it says who leads: on the engine's masters, or in the in-memory engine's model of them. */
  readonly #records: LeaderRecords;
  readonly #instrumentation: InstrumentationGuard | undefined;
  readonly #current = new Set<Leadership>();

  /** @internal Elections come from `redlock.election(name, options)`. */
  constructor(
    engine: ElectionEngine,
    records: LeaderRecords,
    instrumentation: InstrumentationGuard | undefined,
    name: string,
    options: ElectionOptions = {},
  ) {
    super();
    if (typeof name !== 'string' || name.length === 0) throw new InvalidArgumentError('name', name, 'expected a non-empty string');
    this.name = name;
    this.leaseMs = checkTtl('leaseMs', options.leaseMs ?? DEFAULT_LEASE_MS, engine.options.maxTtlMs);
    this.resource = electionResource(name);
    this.#engine = engine;
    this.#records = records;
    this.#instrumentation = instrumentation;
  }

  /**
   * Waits until this caller leads the election, then resolves with its Leadership. Waits in the
   * masters' fair queue: woken at once when the leader resigns, or when its lease runs out.
   * While too few masters answer it keeps trying (after the restart quarantine, when that is
   * what is missing); only `signal`, the engine's `releaseAll` (AcquireAbortedError) or a bad
   * argument makes it reject.
   */
  async campaign(identity: string, options: CampaignOptions = {}): Promise<Leadership> {
    if (typeof identity !== 'string' || identity.length === 0 || identity.length > 256 || identity.includes('\n')) {
      throw new InvalidArgumentError('identity', identity, 'expected 1 to 256 characters, without a line break');
    }
    const { signal } = options;
    for (;;) {
      if (signal?.aborted) throw new AcquireAbortedError([this.resource], signal.reason);
      let lock: Lock;
      try {
        lock = await this.#engine.acquire(this.resource, this.leaseMs, { fencing: true, waitTimeoutMs: CAMPAIGN_WAIT_MS, ...(signal ? { signal } : {}) });
      } catch (error) {
        if (error instanceof LockHeldError) continue;
        if (error instanceof QuorumUnreachableError) {
          await sleep(error.retryAfterMs ?? this.leaseMs / 2, undefined, signal ? { signal } : {}).catch(() => {});
          continue;
        }
        throw error;
      }
      return this.#won(lock, identity);
    }
  }

  /**
   * Who leads now, as a majority of masters has it (a read: nothing is written). Null while
   * nobody leads, or a new leader has not recorded itself yet. Rejects with
   * QuorumUnreachableError when too few masters answer to say.
   */
  leader(): Promise<LeaderInfo | null> {
    return this.#records.read(this.name, this.resource, this.leaseMs);
  }

  /** The leaderships of this election that this process holds now (one, unless it campaigns twice). */
  get held(): ReadonlySet<Leadership> {
    return this.#current;
  }

  #won(lock: Lock, identity: string): Leadership {
    lock.isLease = true;
    const records = this.#records;
    const leadership = new Leadership(lock, this.name, identity, this.leaseMs, {
      renewed: () => records.write(lock, identity).catch(() => {}),
      ended: (end: LeadershipEnd) => {
        this.#current.delete(leadership);
        this.#instrumentation?.leadershipEnded(end);
        this.emit('ended', end);
      },
    });
    this.#current.add(leadership);
    leadership.start();
    // Observers learn who leads from this record; the leader leads whether or not it lands.
    void records.write(lock, identity).catch(() => {});
    this.#instrumentation?.leadershipWon(this.name, identity, leadership.term);
    this.emit('elected', leadership);
    return leadership;
  }
}
