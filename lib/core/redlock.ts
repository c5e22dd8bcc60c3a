import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import { monotonicNow, validityLeftMs } from './base/clock.js';
import { LockHeldError, LockLostError } from './base/errors.js';
import { HeldLocks, type Acquisition } from './acquire/held-locks.js';
import { Lock, startExtension, type LockEngine, type ReleaseResult } from './lock/lock.js';
import type { MasterFailure, RoundOperation } from './lock/instrumentation.js';
import { extensionOutcome, InstrumentationGuard } from './lock/instrumentation-guard.js';
import { enterSession, LockSession, runInSession, type SessionEngine } from './acquire/lock-session.js';
import { checkMasters, type MastersHealth } from './voters/master-health.js';
import { grantedIfOne } from './scripts/replies.js';
import { runRound, type RoundReply, type RoundResult } from './rounds/quorum-round.js';
import type { RedisNode } from './voters/redis-node.js';
import { prepareClusterVoters, votersFrom } from './voters/voters.js';
import { ClusterVoter } from './voters/cluster-voter.js';
import { KeyNames } from './rounds/key-names.js';
import { replicaWait } from './voters/replica-acks.js';
import { LocalHandOver } from './waiting/local-hand-over.js';
import { LocalQueue } from './waiting/local-queue.js';
import { QueueEntries } from './waiting/queue-entries.js';
import { ReleaseWakeups } from './waiting/release-wakeups.js';
import { wakeFailureReporter } from './waiting/wake-subscriber.js';
import { roundFailure } from './rounds/round-failure.js';
import { RestartQuarantine, type QuarantineNotice } from './voters/restart-quarantine.js';
import { repeats, VoterAdmission, type DuplicateMaster } from './voters/voter-admission.js';
import { LockAcquirer } from './acquire/lock-acquirer.js';
import { isSentinelManaged } from './voters/sentinel-voter.js';
import { nodeTimeoutMs, resolveOptions, type RedlockOptions, type ResolvedRedlockOptions } from './lock/redlock-options.js';
import { checkProbeTimeout, checkTtl } from './base/argument-checks.js';
import { checkCall, oneRound, type AcquireOptions, type LockedRoutine, type UsingOptions } from './lock/acquire-options.js';
import { Kinds } from './kinds/kinds.js';
import type { EngineRounds } from './rounds/engine-rounds.js';

// Named here too: the Nest layer imports a call's options from the engine it calls.
export type { AcquireOptions, LockedRoutine, UsingOptions };

/**
 * The Redlock algorithm over N independent Redis masters: a lock is held when a majority
 * granted it within its validity, measured on a monotonic clock.
 *
 * Events: `'quarantine'` with a QuarantineNotice when a restarted master's votes stop counting;
 * `'duplicate'` with a DuplicateMaster when a client turns out to reach a server, or a Redis Cluster, already listed.
 */
export class Redlock extends EventEmitter implements LockEngine {
  readonly nodes: readonly RedisNode[];
  /** floor(N/2) + 1. */
  readonly quorum: number;
  readonly options: ResolvedRedlockOptions;
  readonly #held: HeldLocks;
  readonly #quarantine: RestartQuarantine | undefined;
  readonly #admission: VoterAdmission;
  readonly #wakeups: ReleaseWakeups | undefined;
  readonly #localQueue = new LocalQueue();
  readonly #handOver = new LocalHandOver(this, this.#localQueue);
  readonly #entries: QueueEntries;
  readonly #names: KeyNames;
  readonly #kinds: Kinds;
  readonly #instrumentation: InstrumentationGuard | undefined;
  readonly #acquirer: LockAcquirer;
  readonly #sessions: SessionEngine;
  /** Per kind of round, what tells the instrumentation of a master's failure: made once, not per round. */
  readonly #masterFailures: Record<RoundOperation, (index: number, failure: MasterFailure) => void> | undefined;

  constructor(clients: Redis | readonly Redis[], options: RedlockOptions = {}) {
    super();
    this.options = resolveOptions(options);
    const hooks = this.options.instrumentation;
    if (hooks) this.#instrumentation = new InstrumentationGuard(hooks, this.options.logger);
    this.#held = new HeldLocks(this.#instrumentation);
    if (this.#instrumentation?.watchesMasters) this.#masterFailures = masterFailureReporters(this.#instrumentation, () => this.nodes);
    const window = this.options.restartQuarantineMs;
    if (window !== false) {
      this.#quarantine = new RestartQuarantine(window, (notice) => this.#onQuarantine(notice));
    }
    this.nodes = votersFrom(clients);
    prepareClusterVoters(this.nodes, this.options, this.#quarantine, (notice) => this.#onQuarantine(notice));
    this.#admission = new VoterAdmission(this.nodes, this.#quarantine, (duplicate) => this.#onDuplicate(duplicate));
    // A Redis Cluster voter runs a script on one shard: a resource's keys must share a hash slot.
    this.#names = new KeyNames(this.options, this.nodes.some((node) => node instanceof ClusterVoter));
    this.#entries = new QueueEntries(this.nodes, this.#names);
    const rounds: EngineRounds = {
      engine: this,
      nodes: this.nodes,
      quorum: Math.floor(this.nodes.length / 2) + 1,
      options: this.options,
      names: this.#names,
      round: (ttlMs, interpret, send, operation) => this.round(ttlMs, interpret, send, operation),
      vote: (request) => this.vote(request),
    };
    // Ask every master who it is now, so the first acquire does not pay that round trip; a
    // master that cannot answer yet is asked again at its first vote.
    for (const node of this.nodes) this.#admission.identify(node).catch(() => {});
    if (this.options.wakeups) this.#wakeups = new ReleaseWakeups(this.nodes, wakeFailureReporter(this.options.logger, this.#instrumentation));
    // Behind a Cluster or Sentinel voter another server can take over without a restart: a grant by
    // hand-off could come from one whose votes must not count yet. Their waiters take their own rounds.
    const handsOff =
      this.options.handOff &&
      this.#wakeups !== undefined &&
      !this.nodes.some((node) => node instanceof ClusterVoter || isSentinelManaged(node.client.options));
    this.quorum = Math.floor(this.nodes.length / 2) + 1;
    this.#kinds = new Kinds({
      ...rounds,
      entries: this.#entries,
      admission: this.#admission,
      localQueue: this.#localQueue,
      handOver: this.#handOver,
      handsOff,
      held: (lock, round, waiter, queuing, since) => this.#held.add(lock, round, waiter, queuing, since),
    });
    this.#acquirer = new LockAcquirer({
      quorum: this.quorum,
      options: this.options,
      names: this.#names,
      localQueue: this.#localQueue,
      entries: this.#entries,
      kinds: this.#kinds,
      wakeups: this.#wakeups,
      quarantine: this.#quarantine,
      instrumentation: this.#instrumentation,
    });
    this.#sessions = {
      engine: this,
      maxResources: this.options.maxResources,
      acquireChecked: (list, ttlMs, options) => this.#acquirer.acquire(list, ttlMs, options, true),
    };
    if (this.nodes.length % 2 === 0) {
      this.options.logger.warn(
        `redlock: ${this.nodes.length} masters is an even count; it tolerates no more failures than ` +
          `${this.nodes.length - 1} would (quorum ${this.quorum}). Use an odd number of masters.`,
      );
    }
  }

  /** Acquires the lock on every resource at once, waiting per the wait options while it is held elsewhere. */
  async acquire(resources: string | readonly string[], ttlMs: number, options: AcquireOptions = {}): Promise<Lock> {
    return this.#acquirer.acquire(checkCall(resources, ttlMs, options, this.options.maxResources), ttlMs, options, true);
  }

  /** One round, no waiting and no place in line: the lock, or null when another owner holds it. */
  async tryAcquire(resources: string | readonly string[], ttlMs: number, options: Pick<AcquireOptions, 'fencing' | 'mode' | 'limit'> = {}): Promise<Lock | null> {
    const list = checkCall(resources, ttlMs, options, this.options.maxResources);
    try {
      return await this.#acquirer.acquire(list, ttlMs, oneRound(options), false);
    } catch (error) {
      if (error instanceof LockHeldError) return null;
      throw error;
    }
  }

  /**
   * Runs `routine` holding the lock: acquires, extends it while the routine runs (aborting
   * `signal` if that fails or validity runs out), and always releases afterwards.
   * Reentrant: inside a routine, asking again for resources this context already holds runs
   * at once under the outer lock; only the resources not yet held are acquired. A hold that was
   * released, lost or ran out of validity counts for nothing (a task the routine left running
   * acquires for real), and work running under another's hold sees its `signal` fire when that
   * hold is released or lost.
   */
  using<T>(
    resources: string | readonly string[],
    ttlMs: number,
    routine: LockedRoutine<T>,
    options: UsingOptions = {},
  ): Promise<T> {
    return runInSession(() => this.enter(resources, ttlMs, options), routine);
  }

  /**
   * The building block of `using` for work that is not one promise (a stream, an Observable):
   * acquires (or re-enters) and starts auto-extension; the caller runs the work with
   * `session.run()` and must call `session.exit()` when it ends, however it ends.
   */
  enter(resources: string | readonly string[], ttlMs: number, options: UsingOptions = {}): Promise<LockSession> {
    return enterSession(this.#sessions, resources, ttlMs, options);
  }

  /**
   * Tells the restart quarantine about a ttl the application will use, so that its window
   * covers such locks from the start rather than from the first one taken.
   */
  expectTtl(ttlMs: number): void {
    this.#quarantine?.observeTtl(checkTtl('ttlMs', ttlMs));
  }

  /**
   * Asks every master that answers who it is and rejects with InvalidArgumentError if two of the
   * given clients reach the same server (same run_id) or the same Redis Cluster (a node in
   * common), or one is a plain client of a Redis Cluster node: one server must not vote twice,
   * nor a shard alone. Also if the Sentinels of a Sentinel-managed client monitor no master of
   * its name. Masters that do not answer are skipped. The engine never counts such votes anyway;
   * this turns the mistake into a startup error (the Nest module calls it at bootstrap).
   */
  verifyMasters(): Promise<void> {
    return this.#admission.verify();
  }

  /**
   * Whether a lock could be granted now, and what each master looks like (reachable, round trip,
   * restart quarantine, duplicate): for health checks. Writes no lock key; `timeoutMs` bounds
   * each PING (default 1000).
   */
  async checkMasters(timeoutMs = 1_000): Promise<MastersHealth> {
    return checkMasters(this.nodes, this.#admission, this.quorum, checkProbeTimeout(timeoutMs));
  }

  /** Locks acquired through this instance, not released and still valid. */
  get heldLocks(): ReadonlySet<Lock> {
    return this.#held.current();
  }

  /**
   * For shutdown: makes every acquire call in progress give up (AcquireAbortedError with
   * `reason`, its places in the masters' queues withdrawn, whatever a round of it out meanwhile
   * wins given back), those waiting in this process's own line behind another caller too, fires
   * every held lock's signal (so running work stops acting), then releases them all on every
   * master. Resolves once all that is done: no call in progress then gets a lock. Never throws.
   */
  async releaseAll(reason = 'released at shutdown'): Promise<void> {
    // Waiting calls give up first (AcquireAbortedError with `reason`), so that no lock released
    // below is handed over to one of them, and they leave the masters' queues while the
    // connections are still open: an entry left behind would be granted the next release there
    // (server-side hand-off) and block the lock for its ttl.
    const leaving = this.#acquirer.abandonAll(reason);
    const locks = this.#held.stopAll(reason);
    await Promise.all([...locks.map((lock) => lock.release()), leaving]);
  }

  /**
   * Closes the connections the engine opened itself (the wake-up subscribers). The clients
   * given to the constructor stay open: they belong to the caller. Release locks first.
   */
  close(): void {
    this.#wakeups?.close();
  }

  /** @internal Use `lock.extend()`. */
  extendLock(lock: Lock, ttlMs: number): Promise<void> {
    const instrumentation = this.#instrumentation;
    if (!instrumentation) return this.#extend(lock, ttlMs);
    return this.#extend(lock, ttlMs).then(
      () => instrumentation.extensionEnded(lock, 'extended'),
      (error: unknown) => {
        const outcome = extensionOutcome(error);
        if (outcome) instrumentation.extensionEnded(lock, outcome);
        throw error;
      },
    );
  }

  /**
   * @internal Called by a lock whose signal fires, before its listeners run: reports the loss,
   * once per lock, unless the lock was released first or releaseAll is firing it.
   */
  lockLost(lock: Lock, error: unknown): void {
    this.#held.lost(lock, error);
  }

  async #extend(lock: Lock, ttlMs: number): Promise<void> {
    const start = startExtension(lock, ttlMs, this.options);
    this.#quarantine?.observeTtl(ttlMs);
    const request = this.#kinds.of(lock.kind).extendRequest(lock, ttlMs);
    const acks = replicaWait(this.options, ttlMs);
    const round = await this.round(ttlMs, grantedIfOne, this.vote((node) => node.write(request.script, request.keys, request.args, acks)), 'extend');
    const end = monotonicNow();
    const left = validityLeftMs(ttlMs, start, end, this.options.driftFactor);
    if (round.granted >= this.quorum && left > 0) {
      lock.renewed(end + left, ttlMs);
      return;
    }
    // Failed, but any master that got the request may hold the new ttl: what every outcome leaves
    // true is the earlier deadline, counted as for a success.
    if (round.outcomes.some((outcome) => outcome.status !== 'quarantined')) lock.narrowed(end + left, ttlMs);
    const failure = roundFailure(lock.resources, round, this.quorum, left, 0);
    if (failure.error instanceof LockHeldError) {
      const lost = new LockLostError(lock.resources, 'a majority of masters no longer holds this lock', round.outcomes);
      lock.markLost(lost);
      throw lost;
    }
    throw failure.error;
  }

  /** @internal Use `lock.release()`. */
  releaseLock(lock: Lock): Promise<ReleaseResult> {
    const acquisition = this.#held.release(lock);
    const held = acquisition && { round: acquisition.round, waiter: acquisition.waiter, waiterId: enlisted(acquisition) ? acquisition.waiter.id : '' };
    return this.#kinds.of(lock.kind).release(lock, held);
  }

  private round(
    ttlMs: number,
    interpret: (reply: unknown) => RoundReply,
    send: (node: RedisNode, index: number) => Promise<unknown>,
    operation: RoundOperation,
  ): Promise<RoundResult> {
    const timeoutMs = nodeTimeoutMs(this.options, ttlMs);
    // However long this process keeps itself busy, a round ends by half the ttl: a grant later
    // than that would leave less than half a lock.
    const latestMs = Math.max(timeoutMs, ttlMs / 2);
    return runRound(this.nodes, { quorum: this.quorum, timeoutMs, latestMs, onFailure: this.#masterFailures?.[operation] }, send, interpret);
  }

  /** A request whose answer counts as a vote: masters in restart quarantine are not asked. */
  private vote(request: (node: RedisNode) => Promise<unknown>) {
    return (node: RedisNode): Promise<unknown> => {
      const admission = this.#admission.admit(node);
      return admission ? admission.then(() => request(node)) : request(node);
    };
  }

  #onDuplicate(duplicate: DuplicateMaster): void {
    this.options.logger.warn(
      `redlock: clients[${duplicate.index}] (${duplicate.node}) is ${repeats(duplicate.kind, duplicate.sameAsIndex, duplicate.sameAs)}; ` +
        `its votes do not count. ${duplicate.kind === 'same server' ? 'List every master once.' : 'Give a Redis Cluster once, as one Cluster client.'}`,
    );
    this.emit('duplicate', duplicate);
  }

  #onQuarantine(notice: QuarantineNotice): void {
    this.options.logger.warn(
      `redlock: master ${notice.node} ${QUARANTINE_REASONS[notice.reason]}; ` +
        `its votes do not count for ${Math.ceil(notice.remainingMs)} ms, until every lock it may have forgotten has expired`,
    );
    this.emit('quarantine', notice);
  }
}

const QUARANTINE_REASONS: Record<QuarantineNotice['reason'], string> = {
  'run_id changed': 'was restarted or replaced',
  'recent start': 'started recently',
  'promoted replica': 'was promoted from a replica (when is unknown, so it may lack live locks)',
};

function masterFailureReporters(instrumentation: InstrumentationGuard, nodes: () => readonly RedisNode[]) {
  const reporter = (operation: RoundOperation) => (index: number, failure: MasterFailure) =>
    instrumentation.masterFailed(nodes()[index]!.address, failure, operation);
  return { acquire: reporter('acquire'), extend: reporter('extend'), release: reporter('release') };
}

/**
 * Whether a master may hold a queue entry of the lock's waiter: one refused it in an earlier
 * round, or in the winning one, or may still do so (a straggler whose outcome has not landed
 * refuses after the decision). Such an entry would stand ahead of the other waiters until
 * cleared; only when every master is known to have granted is there certainly none.
 */
function enlisted(acquisition: Acquisition): boolean {
  return acquisition.waiter.enlisted || (acquisition.queuing && acquisition.round!.outcomes.some((o) => o.status !== 'granted'));
}
