import { monotonicNow, validityLeftMs } from '../../base/clock.js';
import { nextFence } from '../../base/fence.js';
import type { HandOffGrant } from '../../waiting/hand-off-grants.js';
import type { GuardedAcquire } from '../../lock/instrumentation-guard.js';
import { lineOf, type LocalHandOver } from '../../waiting/local-hand-over.js';
import { WRITE } from '../../lock/lock-kind.js';
import { Lock } from '../../lock/lock.js';
import { ACQUIRE_SCRIPT, FENCE_SCRIPT, QUEUE_ENTRY_STAY_MS } from '../../scripts/lua-scripts.js';
import { grantedIfOne, grantedIfPositive, interpretAcquire, interpretTake } from '../../scripts/script-replies.js';
import type { QueueEntries } from '../../waiting/queue-entries.js';
import { inFlight, NOTHING_FREED, refusedAt, type RoundResult } from '../../rounds/quorum-round.js';
import type { RedisNode } from '../../voters/redis-node.js';
import { replicaWait } from '../../voters/replica-acks.js';
import { roundFailure, type RoundFailure } from '../../rounds/round-failure.js';
import { throwMismatch } from '../shared/shared-holds.js';
import { mismatchWatch } from '../shared/shared-scripts.js';
import { newToken } from '../../base/token.js';
import type { VoterAdmission } from '../../voters/voter-admission.js';
import type { Waiter } from '../../waiting/waiter.js';
import type { EngineRounds } from '../../rounds/engine-rounds.js';

/** What ExclusiveHolds needs of the engine besides its rounds: its queues and registry of held locks. */
export interface ExclusiveRounds extends EngineRounds {
  readonly entries: QueueEntries;
  readonly admission: VoterAdmission;
  readonly handOver: LocalHandOver;
  /** A new lock, held since `since` (monotonic ms): registered as the engine registers its locks. */
  held(lock: Lock, round: RoundResult | undefined, waiter: Waiter, queuing: boolean, since: number): void;
}

/**
 * The exclusive lock (a writer; `limit` 1): one acquire attempt, a plain SET NX or the fair
 * queue's script, with the fence round when asked for, and the compare-and-delete of a release.
 * The counterpart of SharedHolds, for the kind every lock has by default.
 */
export class ExclusiveHolds {
  constructor(private readonly rounds: ExclusiveRounds) {}

  async attempt(
    resources: string[],
    keys: string[],
    ttlMs: number,
    attempt: number,
    fencing: boolean,
    waiter: Waiter,
    /** SET NX without the fair queue: a single unfenced key nobody of this process waits for. */
    plain: boolean,
    observer: GuardedAcquire | undefined,
  ): Promise<{ lock: Lock } | RoundFailure> {
    const { entries, names, options, quorum } = this.rounds;
    // A hand-off waiter's tokens share its prefix: a later round takes over what an earlier one was granted.
    const token = waiter.grants ? waiter.grants.tokenFor(attempt) : newToken();
    const start = monotonicNow();
    let round: RoundResult;
    let mismatch: ReturnType<typeof mismatchWatch> | undefined;
    const scriptKeys = plain ? [] : [...keys, ...entries.keys(resources)];
    // With replicaAcks, every granting write carries a WAIT (undefined, and no cost, without).
    const acks = replicaWait(options, ttlMs);
    if (plain) {
      round = await this.rounds.round(ttlMs, interpretTake, this.rounds.vote((node) => node.take(keys[0]!, token, ttlMs, acks)), 'acquire');
    } else {
      if (fencing) scriptKeys.push(...resources.map((r) => names.fence(r)));
      const args = [token, ttlMs, keys.length, waiter.id, waiter.ticket, QUEUE_ENTRY_STAY_MS, waiter.grants?.prefix ?? '', attempt];
      const watch = mismatchWatch(this.rounds.vote((node) => node.write(ACQUIRE_SCRIPT, scriptKeys, args, acks)));
      mismatch = watch;
      waiter.beforeRound(attempt);
      round = await this.rounds.round(ttlMs, interpretAcquire, watch.send, 'acquire');
      if (round.refused > 0) waiter.enlisted = true; // a refusing master queued us
    }
    /** The grant round itself, not the fence round: what a cleanup must follow and may skip. */
    const asked = round;
    let fence: number | undefined;
    if (fencing && round.granted >= quorum && validityLeftMs(ttlMs, start, monotonicNow(), options.driftFactor) > 0) {
      // Spec section 6: max of what the granting quorum read, plus one, written back to a
      // majority (only where our keys still stand) before the caller may use it.
      const highest = Math.max(...round.outcomes.filter((o) => o.status === 'granted').map((o) => o.value ?? 0));
      fence = nextFence(highest, options.fenceTimeFloor);
      // Only the time floor lets a counter go: without it, the counter alone keeps tokens rising.
      const expireMs = options.fenceTimeFloor ? ttlMs + options.fenceRetentionMs : 0;
      const fenceArgs = [token, fence, keys.length, expireMs];
      round = await this.rounds.round(ttlMs, grantedIfOne, this.rounds.vote((node) => node.write(FENCE_SCRIPT, scriptKeys, fenceArgs, acks)), 'acquire');
    }
    observer?.round(round.granted);
    // Validity counts from `start`: the rounds have spent part of it already. Only what is left
    // now makes a lock; a lock handed out with nothing left would have expired on arrival.
    const end = monotonicNow();
    const left = validityLeftMs(ttlMs, start, end, options.driftFactor);
    if (round.granted >= quorum && left > 0) {
      const lock = new Lock(this.rounds.engine, resources, keys, token, ttlMs, end + left, fence);
      this.rounds.handOver.held(lineOf(keys), lock);
      this.rounds.held(lock, plain ? undefined : round, waiter, !plain, end);
      if (!plain) entries.withdrawWhereRefused(resources, waiter, round, token);
      return { lock };
    }
    // From now on, masters that refused this round may grant it by hand-off.
    if (!plain) waiter.grants?.failed(asked);
    // Timed-out requests may still be applied, and a late grant may land on any node: clean
    // wherever it did not refuse, behind a scripted acquire only once it has finished (see
    // release). Not awaited: the next round goes out behind it on every connection.
    const cleanup = this.release(resources, keys, token, ttlMs, plain ? undefined : asked, '', asked);
    const found = mismatch?.found();
    if (found) await cleanup;
    throwMismatch(found, resources, WRITE, () => entries.leave(resources, waiter, ''));
    return { ...roundFailure(resources, round, quorum, left, attempt), cleanup };
  }

  /**
   * The lock a majority of masters granted `waiter` by hand-off (HandOffGrants), registered as a
   * round's would be; its entries left on masters that did not grant it are withdrawn.
   */
  handedOff(resources: string[], keys: string[], ttlMs: number, waiter: Waiter, grant: HandOffGrant, observer: GuardedAcquire | undefined): Lock {
    observer?.handedOff(grant.masters.size);
    const lock = new Lock(this.rounds.engine, resources, keys, grant.token, ttlMs, grant.deadline);
    this.rounds.handOver.held(lineOf(keys), lock);
    this.rounds.held(lock, grant.round, waiter, true, monotonicNow());
    this.rounds.entries.withdrawWhereRefused(resources, waiter, grant.round, grant.token, grant.masters);
    return lock;
  }

  /**
   * Compare-and-delete on every master, settled like any round as soon as the outcome is known
   * (a quorum freed the keys, or cannot have): the stragglers' requests are already on their
   * connections, and whatever this process sends those masters next queues behind them.
   * One connection keeps command order, with one exception: an EVALSHA answered NOSCRIPT is
   * re-sent as EVAL behind whatever was queued meanwhile. So behind a scripted acquire still
   * in flight (`scriptRound`), the release waits for it, or it could run first and leave the
   * late acquire's key behind. Takes are plain SETs or EVALs, which are never re-sent: a
   * release goes out at once behind them (behind their master's identification when they wait
   * for it), and the next take on that master does not queue
   * behind a late release.
   */
  release(
    resources: readonly string[],
    keys: readonly string[],
    token: string,
    ttlMs: number,
    scriptRound?: RoundResult,
    waiterId = '',
    /** The failed attempt being cleaned up: masters that had refused it by then hold nothing of it. */
    failed?: RoundResult,
  ): Promise<RoundResult> {
    const { admission, entries } = this.rounds;
    const request = { keys, queueKeys: entries.keys(resources), token, waiterId };
    const free = (node: RedisNode) => node.free(request);
    const release = failed ? (node: RedisNode, index: number) => (refusedAt(failed, index) ? NOTHING_FREED : free(node)) : free;
    const send = (node: RedisNode, index: number) => {
      const pending = inFlight(scriptRound, index);
      if (pending) return pending.then(() => release(node, index));
      // A take still waiting to learn who its master is has not been sent: go out behind it.
      const pendingAdmission = admission.pending(node);
      return pendingAdmission ? pendingAdmission.then(() => release(node, index), () => release(node, index)) : release(node, index);
    };
    return this.rounds.round(ttlMs, grantedIfPositive, send, 'release');
  }
}
