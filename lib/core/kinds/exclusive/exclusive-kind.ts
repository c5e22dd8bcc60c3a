import { monotonicNow, validityLeftMs } from '../../base/clock.js';
import { nextFence } from '../../base/fence.js';
import { newToken } from '../../base/token.js';
import { WRITE } from '../../lock/lock-kind.js';
import { Lock, type ReleaseResult } from '../../lock/lock.js';
import { mismatchWatch, throwMismatch } from '../../rounds/kind-mismatch.js';
import { inFlight, NOTHING_FREED, refusedAt, type RoundResult } from '../../rounds/quorum-round.js';
import { extensionRound } from '../../rounds/engine-rounds.js';
import { roundFailure } from '../../rounds/round-failure.js';
import { grantedIfOne, grantedIfPositive } from '../../scripts/replies.js';
import type { RedisNode } from '../../voters/redis-node.js';
import { replicaWait } from '../../voters/replica-acks.js';
import { HandOffGrants, type HandOffGrant } from '../../waiting/hand-off-grants.js';
import { lineOf } from '../../waiting/local-hand-over.js';
import type { Waiter } from '../../waiting/waiter.js';
import { QUEUE_ENTRY_STAY_MS } from '../../waiting/queue-scripts.js';
import { handAwayFrom, handOverOrFree } from '../hand-over-release.js';
import type { AttemptCall, Attempted, GrantCall, HeldBy, HoldKind, KindParts } from '../hold-kind.js';
import { FREES, TAKES } from './exclusive-batches.js';
import { ACQUIRE_SCRIPT, EXTEND_SCRIPT, FENCE_SCRIPT, interpretAcquire, interpretTake } from './exclusive-scripts.js';

/**
 * The exclusive lock (a writer; `limit` 1), the kind every lock has by default: one acquire
 * attempt is a plain SET NX or the fair queue's script, with the fence round when asked for;
 * its release is a compare-and-delete. One caller of this process at a time talks to the masters
 * for a resource, and a release passes the lock to the next of them directly (LocalHandOver), or
 * the masters grant it to the head of their queue (HandOffGrants).
 */
export class ExclusiveKind implements HoldKind {
  readonly kind = WRITE;
  readonly width = 1;

  constructor(private readonly rounds: KindParts) {}

  localLine(line: string): string {
    return line;
  }

  /** Even a caller that will not wait lines up: the line tells the first whether a plain SET NX may do. */
  linesUp(): boolean {
    return true;
  }

  holderHere(line: string): Lock | undefined {
    return this.rounds.handOver.holderOf(line);
  }

  /** Held in this process: the holder hands the lock over or wakes the caller when it releases. */
  standByMs(line: string): number | undefined {
    return this.holderHere(line)?.remainingMs();
  }

  /** Asleep, a waiter can be handed the lock by a caller of this process releasing it. */
  sleep(localLine: string, waiter: Waiter, pause: () => Promise<void>, handOver: boolean): Promise<void> {
    return handOver ? this.rounds.handOver.asleep(localLine, waiter, pause) : pause();
  }

  /** A single unfenced key only: a fenced lock's fence needs a round of its own. */
  grantsFor({ keys, fencing, waits }: GrantCall): HandOffGrants | undefined {
    const { nodes, quorum, options, handsOff } = this.rounds;
    return waits && !fencing && keys.length === 1 && handsOff ? new HandOffGrants(nodes, quorum, keys[0]!, options.driftFactor) : undefined;
  }

  extend(lock: Lock, ttlMs: number): Promise<RoundResult> {
    return extensionRound(this.rounds, ttlMs, EXTEND_SCRIPT, lock.keys, [lock.token, ttlMs]);
  }

  async attempt({ resources, keys, ttlMs, attempt, fencing, waiter, uncontended, observer }: AttemptCall): Promise<Attempted> {
    // SET NX without the fair queue: a single unfenced key nobody of this process waits for. A
    // caller that waits skips it where this process holds readers or permits (their marker would
    // refuse it) and takes its place in the queue at once; one that will not wait keeps its one
    // plain try, which answers "held" (GUARANTEES, "One family per resource").
    const plain = uncontended && attempt === 1 && keys.length === 1 && !fencing && (waiter.id === '' || !this.rounds.sharedHere.holds(keys[0]!));
    const { entries, names, options, quorum } = this.rounds;
    // A hand-off waiter's tokens share its prefix: a later round takes over what an earlier one was
    // granted. A plain take is never granted by hand-off (it leaves no queue entry), and what it
    // took where the round failed is freed behind it on each connection, ahead of the next round.
    const grants = plain ? undefined : waiter.grants;
    const token = grants ? grants.tokenFor(attempt) : newToken();
    const start = monotonicNow();
    let round: RoundResult;
    let mismatch: ReturnType<typeof mismatchWatch> | undefined;
    const scriptKeys = plain ? [] : [...keys, ...entries.keys(resources)];
    // With replicaAcks, every granting write carries a WAIT (undefined, and no cost, without).
    const acks = replicaWait(options, ttlMs);
    if (plain) {
      const take = { key: keys[0]!, token, ttlMs, acks };
      round = await this.rounds.round(ttlMs, interpretTake, this.rounds.vote((node) => node.batched(TAKES, take)), 'acquire');
    } else {
      if (fencing) scriptKeys.push(...resources.map((r) => names.fence(r)));
      const args = [token, ttlMs, keys.length, waiter.id, waiter.ticket, QUEUE_ENTRY_STAY_MS, grants?.prefix ?? '', attempt];
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
    // Validity counts from `start`: the rounds have spent part of it already. Only what is left
    // now makes a lock; a lock handed out with nothing left would have expired on arrival.
    const end = monotonicNow();
    observer?.round(round.granted, end - start);
    const left = validityLeftMs(ttlMs, start, end, options.driftFactor);
    if (round.granted >= quorum && left > 0) {
      const lock = new Lock(this.rounds.engine, resources, keys, token, ttlMs, end + left, fence);
      this.rounds.handOver.held(lineOf(keys), lock);
      this.rounds.held(lock, plain ? undefined : round, waiter, !plain, end);
      if (!plain) entries.withdrawWhereRefused(resources, waiter, round, token);
      return { lock, room: 0, outcomes: round.outcomes };
    }
    // From now on, masters that refused this round may grant it by hand-off.
    grants?.failed(asked);
    // Timed-out requests may still be applied, and a late grant may land on any node: clean
    // wherever it did not refuse, behind a scripted acquire only once it has finished (see
    // release). Not awaited: the next round goes out behind it on every connection.
    const cleanup = this.#free(resources, keys, token, ttlMs, plain ? undefined : asked, '', asked);
    const found = mismatch?.found();
    if (found) await cleanup;
    throwMismatch(found, resources, WRITE, () => entries.leave(resources, waiter, ''));
    return { ...roundFailure(resources, round, quorum, left, attempt), cleanup };
  }

  /**
   * The lock a majority of masters granted `waiter` by hand-off (HandOffGrants), registered as a
   * round's would be; its entries left on masters that did not grant it are withdrawn.
   */
  handedOff({ resources, keys, ttlMs, waiter, observer }: AttemptCall, grant: HandOffGrant): Lock {
    observer?.handedOff(grant.masters.size);
    const lock = new Lock(this.rounds.engine, resources, keys, grant.token, ttlMs, grant.deadline);
    this.rounds.handOver.held(lineOf(keys), lock);
    this.rounds.held(lock, grant.round, waiter, true, monotonicNow());
    this.rounds.entries.withdrawWhereRefused(resources, waiter, grant.round, grant.token, grant.masters);
    return lock;
  }

  /**
   * To the next caller of this process waiting for it, if one is; else freed on every master,
   * and the next caller of this process woken to try.
   */
  release(lock: Lock, held: HeldBy | undefined): Promise<ReleaseResult> {
    // Keys granted by hand-off to the old holder's entries go on to the next waiter (keep its token).
    return handOverOrFree(this.rounds, lock, held, lineOf(lock.keys), lock.token, async () => {
      const round = await this.#free(lock.resources, lock.keys, lock.token, lock.ttlMs, held?.round, held?.waiterId ?? '');
      return { releasedOn: round.granted, heldUntilRelease: round.granted >= this.rounds.quorum, nodes: round.outcomes };
    });
  }

  /** Handed to another process: its keys stay, this process's next caller asks the masters. */
  handAway(lock: Lock): void {
    handAwayFrom(this.rounds, lock, lineOf(lock.keys));
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
  #free(
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
    const free = (node: RedisNode) => node.batched(FREES, request);
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
