import { EventEmitter } from 'node:events';
import { HeldLocks } from './acquire/held-locks.js';
import type { Lock, LockEngine, ReleaseResult } from './lock/lock.js';
import type { MasterFailure, RoundOperation } from './lock/instrumentation.js';
import { InstrumentationGuard } from './lock/instrumentation-guard.js';
import type { LockSession } from './acquire/lock-session.js';
import { EngineCore } from './acquire/engine-core.js';
import { checkMasters, type MastersHealth } from './voters/master-health.js';
import { runRound, type RoundReply, type RoundResult } from './rounds/quorum-round.js';
import { BY_INFO, type Identification, type RedisNode } from './voters/redis-node.js';
import { InvalidArgumentError } from './base/errors.js';
import { prepareClusterVoters, votersFrom } from './voters/voters.js';
import type { RedlockClient } from './voters/clients/clients.js';
import { ClusterVoter } from './voters/cluster-voter.js';
import { KeyNames } from './rounds/key-names.js';
import { verifyPermissions } from './voters/permission-probe.js';
import { Election, type ElectionOptions } from './election/election.js';
import { MasterLeaderRecords } from './election/leader-records.js';
import { inspectResources, type LockInspection } from './inspection/lock-inspection.js';
import { forceRelease, queuedWaiters, type ForcedRelease, type QueueListing } from './inspection/operator-scripts.js';
import { LocalHandOver } from './waiting/local-hand-over.js';
import { LocalQueue } from './waiting/local-queue.js';
import { SharedHoldsHere } from './waiting/shared-holds-here.js';
import { QueueEntries } from './waiting/queue-entries.js';
import { ReleaseWakeups } from './waiting/release-wakeups.js';
import { wakeFailureReporter } from './waiting/wake-subscriber.js';
import { RestartQuarantine, type QuarantineNotice } from './voters/restart-quarantine.js';
import { repeats, VoterAdmission, type DuplicateMaster } from './voters/voter-admission.js';
import { nodeTimeoutMs, resolveOptions, type RedlockOptions, type ResolvedRedlockOptions } from './lock/redlock-options.js';
import { checkProbeTimeout, checkTtl, checkResources } from './base/argument-checks.js';
import type { AcquireOptions, LockedRoutine, TryAcquireOptions, UsingOptions } from './lock/acquire-options.js';
import { redisKinds } from './kinds/kinds.js';
import type { EngineRounds } from './rounds/engine-rounds.js';

// Named here too: the Nest layer imports a call's options from the engine it calls.
export type { AcquireOptions, LockedRoutine, TryAcquireOptions, UsingOptions };

/**
 * The Redlock algorithm over N independent Redis masters: a lock is held when a majority
 * granted it within its validity, measured on a monotonic clock.
 *
 * Events: `'quarantine'` with a QuarantineNotice when a restarted master's votes stop counting;
 * `'duplicate'` with a DuplicateMaster when a client turns out to reach a server, or a Redis Cluster, already listed.
 */
export class Redlock extends EventEmitter implements LockEngine {
  /** @internal The voters, in the order of every round's outcomes; `checkMasters()` reports on them. */
  readonly nodes: readonly RedisNode[];
  /** floor(N/2) + 1. */
  readonly quorum: number;
  /** @internal The options with their defaults filled in. */
  readonly options: ResolvedRedlockOptions;
  readonly #quarantine: RestartQuarantine | undefined;
  readonly #admission: VoterAdmission;
  readonly #wakeups: ReleaseWakeups | undefined;
  /** What every engine does over its masters: acquire calls, sessions, held locks, extensions, releases. */
  readonly #core: EngineCore;
  /** Where elections say who leads them, on these masters. */
  readonly #leaderRecords: MasterLeaderRecords;
  readonly #instrumentation: InstrumentationGuard | undefined;
  /** What the kinds' rounds use of this engine; inspections read the masters through it. */
  readonly #rounds: EngineRounds;
  /** Per kind of round, what tells the instrumentation of a master's failure: made once, not per round. */
  readonly #masterFailures: Record<RoundOperation, (index: number, failure: MasterFailure) => void> | undefined;

  constructor(clients: RedlockClient | readonly RedlockClient[], options: RedlockOptions = {}) {
    super();
    this.options = resolveOptions(options);
    const hooks = this.options.instrumentation;
    const instrumentation = hooks && new InstrumentationGuard(hooks, this.options.logger);
    this.#instrumentation = instrumentation;
    const held = new HeldLocks(instrumentation);
    if (instrumentation?.watchesMasters) this.#masterFailures = masterFailureReporters(instrumentation, () => this.nodes);
    const window = this.options.restartQuarantineMs;
    if (window !== false) {
      this.#quarantine = new RestartQuarantine(window, (notice) => this.#onQuarantine(notice), this.options.quarantineAtFirstSight);
    }
    this.nodes = votersFrom(clients);
    prepareClusterVoters(this.nodes, this.options, this.#quarantine, (notice) => this.#onQuarantine(notice));
    this.#admission = new VoterAdmission(this.nodes, this.#quarantine, (duplicate) => this.#onDuplicate(duplicate), identificationOf(this.options, this.nodes));
    // A Redis Cluster voter runs a script on one shard: a resource's keys must share a hash slot.
    const names = new KeyNames(this.options, this.nodes.some((node) => node instanceof ClusterVoter));
    const entries = new QueueEntries(this.nodes, names);
    const rounds: EngineRounds = {
      engine: this,
      nodes: this.nodes,
      quorum: Math.floor(this.nodes.length / 2) + 1,
      options: this.options,
      names,
      round: (ttlMs, interpret, send, operation) => this.round(ttlMs, interpret, send, operation),
      vote: (request) => this.vote(request),
    };
    // Ask every master who it is now, so the first acquire does not pay that round trip; a
    // master that cannot answer yet is asked again at its first vote.
    for (const node of this.nodes) this.#admission.identify(node).catch(() => {});
    if (this.options.wakeups) this.#wakeups = new ReleaseWakeups(this.nodes, wakeFailureReporter(this.options.logger, instrumentation));
    // Behind a Cluster or Sentinel voter another server can take over without a restart: a grant by
    // hand-off could come from one whose votes must not count yet. Their waiters take their own rounds.
    const handsOff =
      this.options.handOff &&
      this.#wakeups !== undefined &&
      !this.nodes.some((node) => node instanceof ClusterVoter || node.client.sentinel !== undefined);
    this.quorum = Math.floor(this.nodes.length / 2) + 1;
    const localQueue = new LocalQueue();
    const kinds = redisKinds({
      ...rounds,
      entries,
      admission: this.#admission,
      localQueue,
      handOver: new LocalHandOver(this, localQueue),
      handsOff,
      sharedHere: new SharedHoldsHere(),
      held: (lock, round, waiter, queuing, since) => held.add(lock, round, waiter, queuing, since),
    });
    this.#leaderRecords = new MasterLeaderRecords(rounds);
    this.#rounds = rounds;
    this.#core = new EngineCore(this, {
      quorum: this.quorum,
      options: this.options,
      names,
      localQueue,
      entries,
      kinds,
      wakeups: this.#wakeups,
      quarantine: this.#quarantine,
      instrumentation,
      held,
    });
    if (this.nodes.length % 2 === 0) {
      this.options.logger.warn(
        `redlock: ${this.nodes.length} masters is an even count; it tolerates no more failures than ` +
          `${this.nodes.length - 1} would (quorum ${this.quorum}). Use an odd number of masters.`,
      );
    }
  }

  /** Acquires the lock on every resource at once, waiting per the wait options while it is held elsewhere. */
  acquire(resources: string | readonly string[], ttlMs: number, options: AcquireOptions = {}): Promise<Lock> {
    return this.#core.acquire(resources, ttlMs, options);
  }

  /** One round, no waiting and no place in line: the lock, or null when another owner holds it. */
  tryAcquire(resources: string | readonly string[], ttlMs: number, options: TryAcquireOptions = {}): Promise<Lock | null> {
    return this.#core.tryAcquire(resources, ttlMs, options);
  }

  /**
   * Takes the lock in one round, if nobody holds it, and leaves it to expire after `ttlMs`: it is
   * never extended and never released, not even by `releaseAll` at shutdown. For "at most once per
   * `ttlMs`" across processes (a scheduled job's tick, a lease), where releasing early would let
   * another process do the same again. Resolves true when this call took it, false when another
   * owner holds it; rejects as `tryAcquire` does (too few masters, bad arguments). Its ttl does
   * not lengthen the restart quarantine's window, which stays the longest lock ttl.
   */
  claim(resources: string | readonly string[], ttlMs: number): Promise<boolean> {
    return this.#core.claim(resources, ttlMs);
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
    return this.#core.using(resources, ttlMs, routine, options);
  }

  /**
   * The building block of `using` for work that is not one promise (a stream, an Observable):
   * acquires (or re-enters) and starts auto-extension; the caller runs the work with
   * `session.run()` and must call `session.exit()` when it ends, however it ends.
   */
  enter(resources: string | readonly string[], ttlMs: number, options: UsingOptions = {}): Promise<LockSession> {
    return this.#core.enter(resources, ttlMs, options);
  }

  /**
   * For operators: breaks `resource`'s lock on every master that answers, whoever holds it (a
   * lock, readers, permits), raises its fence counter so the next fenced holder's token is larger
   * than any handed out (a store that checks tokens then refuses the old holder's writes), and
   * wakes the first waiter. The old holder is not told: its signal fires at its next extension,
   * or never if it does not extend. Use it on a lock whose holder is gone or stuck, never as a
   * way to take a lock (`npx nestjs-redlock release <resource> --force`).
   */
  async forceRelease(resource: string): Promise<ForcedRelease> {
    return forceRelease(this.#rounds, checkResources(resource, 1)[0]!);
  }

  /** For operators: who waits in `resource`'s fair queue, first in line first, and how many masters answered. */
  async waiters(resource: string): Promise<QueueListing> {
    return queuedWaiters(this.#rounds, checkResources(resource, 1)[0]!);
  }

  /**
   * Takes up a lock that another process (or engine) on the same masters handed over with
   * `lock.handOver()`: one extension round to `ttlMs` (default: the ttl the lock had), after
   * which the lock is this engine's to extend and release, with the same fence. Rejects with
   * LockLostError when a majority no longer holds it, InvalidArgumentError for a string that is
   * not a handle (which is never echoed: a handle carries the lock's token).
   */
  adopt(handle: string, ttlMs?: number): Promise<Lock> {
    return this.#core.adopt(handle, ttlMs);
  }

  /**
   * What each resource looks like on the masters now, without taking it (nothing is written):
   * held, free or unknown as a majority says, by what kind of lock, until when, its fence, how
   * many wait, and each master's answer (never a token). A snapshot, never a reason to skip
   * locking: the lock may change hands the moment after.
   */
  async inspect(resources: string | readonly string[]): Promise<LockInspection[]> {
    return inspectResources(this.#rounds, checkResources(resources, this.options.maxResources));
  }

  /**
   * A named leader election on these masters: `campaign` waits to lead it and returns the
   * Leadership (its term a fencing token, its signal aborting when it ends), `leader()` says who
   * leads without campaigning. The leader holds the lock on `election:<name>` (do not lock that
   * resource yourself), renewed while it lives; `releaseAll` resigns it.
   */
  election(name: string, options: ElectionOptions = {}): Election {
    return new Election(this, this.#leaderRecords, this.#instrumentation, name, options);
  }


  /**
   * Tells the restart quarantine about a ttl the application will use, so that its window
   * covers such locks from the start rather than from the first one taken.
   */
  expectTtl(ttlMs: number): void {
    this.#quarantine?.observeTtl(checkTtl('ttlMs', ttlMs, this.options.maxTtlMs));
  }

  /**
   * Tries, on every master that answers, each command the engine needs, in ways that change
   * nothing, and rejects with PermissionDeniedError naming every master and command its Redis
   * user may not run (an ACL without them would fail locks one by one, later). The Nest module
   * runs it at bootstrap. Opens and closes one short-lived connection per master (SUBSCRIBE).
   */
  verifyPermissions(timeoutMs = 2_000): Promise<void> {
    return verifyPermissions(this.nodes, this.options, checkProbeTimeout(timeoutMs));
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
    return this.#core.heldLocks;
  }

  /**
   * For shutdown: makes every acquire call in progress give up (AcquireAbortedError with
   * `reason`, its places in the masters' queues withdrawn, whatever a round of it out meanwhile
   * wins given back), those waiting in this process's own line behind another caller too, fires
   * every held lock's signal (so running work stops acting), then releases them all on every
   * master. Resolves once all that is done: no call in progress then gets a lock. Never throws.
   */
  releaseAll(reason = 'released at shutdown'): Promise<void> {
    return this.#core.releaseAll(reason);
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
    return this.#core.extendLock(lock, ttlMs);
  }

  /**
   * @internal Called by a lock whose signal fires, before its listeners run: reports the loss,
   * once per lock, unless the lock was released first or releaseAll is firing it.
   */
  lockLost(lock: Lock, error: unknown): void {
    this.#core.lockLost(lock, error);
  }

  /** @internal Use `lock.release()`. */
  releaseLock(lock: Lock): Promise<ReleaseResult> {
    return this.#core.releaseLock(lock);
  }

  /** @internal Use `lock.handOver()`. */
  handOverLock(lock: Lock): void {
    this.#core.handOverLock(lock);
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
  'new data set': 'holds another data set than before (its marker key changed: restarted empty or replaced)',
};

function masterFailureReporters(instrumentation: InstrumentationGuard, nodes: () => readonly RedisNode[]) {
  const reporter = (operation: RoundOperation) => (index: number, failure: MasterFailure) =>
    instrumentation.masterFailed(nodes()[index]!.address, failure, operation);
  return { acquire: reporter('acquire'), extend: reporter('extend'), release: reporter('release') };
}

/**
 * How this engine identifies its masters (`identifyBy`). A marker cannot see a failover to a
 * replica (it was replicated there), and failing over is what Sentinel groups and Redis Cluster
 * voters do: refused with them.
 */
function identificationOf(options: ResolvedRedlockOptions, nodes: readonly RedisNode[]): Identification {
  if (options.identifyBy === 'info') return BY_INFO;
  const failsOver = nodes.findIndex((node) => node instanceof ClusterVoter || node.client.sentinel !== undefined);
  if (failsOver !== -1) {
    throw new InvalidArgumentError(
      'identifyBy',
      'marker',
      `clients[${failsOver}] fails over to replicas (a Sentinel group or a Redis Cluster), which a marker key cannot see: identify such masters by INFO`,
    );
  }
  // No resource is empty, so no lock, queue or fence key is the bare prefix: the marker's own key.
  return { by: 'marker', markerKey: options.fenceKeyPrefix };
}
