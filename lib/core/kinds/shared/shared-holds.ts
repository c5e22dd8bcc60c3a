import { monotonicNow, validityLeftMs } from '../../base/clock.js';
import { LockHeldError, LockKindMismatchError } from '../../base/errors.js';
import { nextFence } from '../../base/fence.js';
import type { GuardedAcquire } from '../../lock/instrumentation-guard.js';
import { describeKind, markerOf, type LockKind } from '../../lock/lock-kind.js';
import { Lock } from '../../lock/lock.js';
import { QUEUE_ENTRY_STAY_MS } from '../../scripts/lua-scripts.js';
import { grantedIfOne, grantedIfPositive } from '../../scripts/script-replies.js';
import { inFlight, NOTHING_FREED, refusedAt, type RoundResult } from '../../rounds/quorum-round.js';
import type { RedisNode } from '../../voters/redis-node.js';
import { replicaWait } from '../../voters/replica-acks.js';
import { AckedReply } from '../../voters/replica-acks.js';
import { roundFailure, type RoundFailure } from '../../rounds/round-failure.js';
import {
  readSharedReply,
  SHARED_ACQUIRE_SCRIPT,
  SHARED_EXTEND_SCRIPT,
  SHARED_FENCE_SCRIPT,
  SHARED_RELEASE_SCRIPT,
  sharedVote,
} from './shared-scripts.js';
import { newToken } from '../../base/token.js';
import type { Waiter } from '../../waiting/waiter.js';
import type { EngineRounds } from '../../rounds/engine-rounds.js';

/** What SharedHolds needs of the engine besides its rounds. */
export interface SharedRounds extends EngineRounds {
  /** A new hold: registered as the engine registers its locks. */
  held(lock: Lock, round: RoundResult, waiter: Waiter): void;
  /** A waiter that gives up leaves the masters' queues. */
  leave(resources: readonly string[], waiter: Waiter): void;
  /** After a win, the waiter's entries where masters refused it leave their queues (they would head them). */
  withdraw(resources: readonly string[], waiter: Waiter, round: RoundResult): void;
}

/**
 * Readers (`mode: 'read'`) and permits (`limit` > 1): the acquire, extend and release rounds of
 * holds that share a resource. A permit is a slot of the resource held by a majority, exactly
 * as a lock is (docs/GUARANTEES.md, "Semaphores and read-write locks"): a round wins only when
 * a majority granted the *same* slots, not merely a majority of grants.
 */
export class SharedHolds {
  constructor(private readonly rounds: SharedRounds) {}

  async attempt(
    resources: string[],
    keys: string[],
    ttlMs: number,
    attempt: number,
    fencing: boolean,
    waiter: Waiter,
    kind: LockKind,
    observer: GuardedAcquire | undefined,
  ): Promise<{ lock: Lock; roomLeft: boolean } | RoundFailure> {
    const first = await this.#try(resources, keys, ttlMs, attempt, fencing, waiter, kind, observer, []);
    // Masters that disagreed on the slot: once more at once, asking for the slot free on most of
    // them, once the first try's entries are gone (else they would take that slot themselves).
    if (!('preferred' in first)) return first;
    await first.cleanup;
    const second = await this.#try(resources, keys, ttlMs, attempt, fencing, waiter, kind, observer, first.preferred);
    // A second try never asks to prefer again: it ends in a lock or a failure.
    if ('preferred' in second) return { error: new LockHeldError(resources, [], attempt, 0), retryable: true, cleanup: second.cleanup };
    return second;
  }

  async #try(
    resources: string[],
    keys: string[],
    ttlMs: number,
    attempt: number,
    fencing: boolean,
    waiter: Waiter,
    kind: LockKind,
    observer: GuardedAcquire | undefined,
    preferred: readonly string[],
  ): Promise<{ lock: Lock; roomLeft: boolean } | RoundFailure | { preferred: string[]; cleanup: Promise<unknown> }> {
    const { names, options, quorum } = this.rounds;
    const token = newToken();
    const start = monotonicNow();
    const marker = markerOf(kind);
    const n = keys.length;
    const scriptKeys = [...keys, ...resources.map((r) => names.queue(r)), ...resources.map((r) => names.holders(r))];
    if (fencing) scriptKeys.push(...resources.map((r) => names.fence(r)));
    const limit = kind.type === 'permit' ? kind.limit : 0;
    const args = [token, ttlMs, n, waiter.id, waiter.ticket, QUEUE_ENTRY_STAY_MS, marker, limit, ...keys.map((_, i) => preferred[i] ?? '')];
    const acks = replicaWait(options, ttlMs);
    // Per master, what it granted (a round's votes count only where they agree on the slots), and any mismatch.
    const grants: ({ slots: string; free: readonly string[] } | undefined)[] = [];
    let mismatch: { resourceIndex: number; found: string } | undefined;
    const request = this.rounds.vote((node) => node.write(SHARED_ACQUIRE_SCRIPT, scriptKeys, args, acks));
    const send = (node: RedisNode, index: number) =>
      request(node).then((reply) => {
        try {
          const read = readSharedReply(reply instanceof AckedReply ? reply.reply : reply, n);
          if (read.kind === 'granted') grants[index] = { slots: read.slots.join(' '), free: read.free };
          if (read.kind === 'mismatch') mismatch = read;
        } catch {
          // The round's own reading of the reply turns it into that master's error.
        }
        return reply;
      });
    waiter.beforeRound();
    let round = await this.rounds.round(ttlMs, sharedVote(n), send, 'acquire');
    /** The grant round itself, not the fence round: what a cleanup must follow and may skip. */
    const asked = round;
    if (round.refused > 0) waiter.enlisted = true;
    const agreed = agreedSlots(round, grants);
    let fence: number | undefined;
    if (fencing && agreed.count >= quorum && validityLeftMs(ttlMs, start, monotonicNow(), options.driftFactor) > 0) {
      const granted = round.outcomes.filter((o, index) => o.status === 'granted' && grants[index]?.slots === agreed.slots);
      fence = nextFence(Math.max(...granted.map((o) => o.value ?? 0)), options.fenceTimeFloor);
      const expireMs = options.fenceTimeFloor ? ttlMs + options.fenceRetentionMs : 0;
      const fenceArgs = [token, fence, n, expireMs, marker, ...agreed.slots!.split(' ')];
      round = await this.rounds.round(ttlMs, grantedIfOne, this.rounds.vote((node) => node.write(SHARED_FENCE_SCRIPT, scriptKeys, fenceArgs, acks)), 'acquire');
      agreed.count = round.granted;
    }
    observer?.round(agreed.count);
    const end = monotonicNow();
    const left = validityLeftMs(ttlMs, start, end, options.driftFactor);
    if (agreed.count >= quorum && left > 0) {
      const slots = kind.type === 'permit' ? agreed.slots!.split(' ').map(Number) : undefined;
      const lock = new Lock(this.rounds.engine, resources, keys, token, ttlMs, end + left, fence, kind, slots);
      this.rounds.held(lock, round, waiter);
      this.rounds.withdraw(resources, waiter, round);
      if (slots) this.#dropOtherSlots(resources, keys, token, kind, round, grants, agreed.slots);
      // Readers all fit; a permit left room if a master that granted it had another slot free on every resource.
      const roomLeft = !slots || grants.some((grant) => grant !== undefined && grant.slots === agreed.slots && grant.free.every((free) => free.includes(',')));
      return { lock, roomLeft };
    }
    // Wherever it did not refuse, behind the grant requests still in flight; not awaited: the
    // next try goes out behind it on every connection.
    const cleanup = this.release(resources, keys, token, kind, undefined, ttlMs, asked, '', asked);
    if (mismatch) await cleanup;
    throwMismatch(mismatch, resources, kind, () => this.rounds.leave(resources, waiter));
    // A majority granted, but not the same slots: a split, not a refusal.
    if (agreed.count < quorum && round.granted >= quorum) {
      if (preferred.length === 0) return { preferred: mostFree(grants, n), cleanup };
      // Still split: another round soon (the masters' states converge as holders come and go).
      return { error: split(resources, round, grants, agreed.slots, attempt), retryable: true, cleanup };
    }
    return { ...roundFailure(resources, round, quorum, left, attempt), cleanup };
  }

  /**
   * After a win: a master that granted other slots than the majority's holds an entry that is
   * no part of the permit and only takes a slot there, refusing the next waiters until this
   * holder leaves. Dropped at once (on a straggler, once it has answered), as an extension would.
   */
  #dropOtherSlots(
    resources: readonly string[],
    keys: readonly string[],
    token: string,
    kind: LockKind,
    round: RoundResult,
    grants: readonly ({ slots: string } | undefined)[],
    agreed: string | undefined,
  ): void {
    const { keys: scriptKeys, args } = this.#releaseRequest(resources, keys, token, kind, undefined, '');
    round.outcomes.forEach((outcome, index) => {
      const drop = () => {
        const grant = grants[index];
        if (outcome.status !== 'granted' || !grant || grant.slots === agreed) return;
        this.rounds.nodes[index]!.run(SHARED_RELEASE_SCRIPT, scriptKeys, args).catch(() => {});
      };
      const pending = inFlight(round, index);
      if (pending) void pending.then(drop);
      else drop();
    });
  }

  /** The extension round's request for a reader or a permit. */
  extendRequest(lock: Lock, ttlMs: number): { script: typeof SHARED_EXTEND_SCRIPT; keys: string[]; args: (string | number)[] } {
    const keys = [...lock.keys, ...lock.resources.map((r) => this.rounds.names.holders(r))];
    return { script: SHARED_EXTEND_SCRIPT, keys, args: [lock.token, ttlMs, markerOf(lock.kind), ...slotArgs(lock.kind, lock.slots, lock.keys.length)] };
  }

  /**
   * Drops the hold on every master, behind the winning round's requests still in flight there
   * (an EVALSHA re-sent as EVAL after NOSCRIPT would otherwise land after the release).
   */
  release(
    resources: readonly string[],
    keys: readonly string[],
    token: string,
    kind: LockKind,
    slots: readonly number[] | undefined,
    ttlMs: number,
    scriptRound: RoundResult | undefined,
    waiterId: string,
    /** The failed attempt being cleaned up: masters that had refused it by then hold nothing of it. */
    failed?: RoundResult,
  ): Promise<RoundResult> {
    const { keys: scriptKeys, args } = this.#releaseRequest(resources, keys, token, kind, slots, waiterId);
    const release = (node: RedisNode, index: number) =>
      failed && refusedAt(failed, index) ? NOTHING_FREED : node.run(SHARED_RELEASE_SCRIPT, scriptKeys, args);
    const send = (node: RedisNode, index: number) => {
      const pending = inFlight(scriptRound, index);
      return pending ? pending.then(() => release(node, index)) : release(node, index);
    };
    return this.rounds.round(ttlMs, grantedIfPositive, send, 'release');
  }

  /** SHARED_RELEASE_SCRIPT's keys and arguments; no slots: our entry goes whatever its slot. */
  #releaseRequest(
    resources: readonly string[],
    keys: readonly string[],
    token: string,
    kind: LockKind,
    slots: readonly number[] | undefined,
    waiterId: string,
  ): { keys: string[]; args: (string | number)[] } {
    const { names } = this.rounds;
    return {
      keys: [...keys, ...resources.map((r) => names.queue(r)), ...resources.map((r) => names.holders(r))],
      args: [QUEUE_ENTRY_STAY_MS, token, waiterId, markerOf(kind), kind.type === 'permit' ? kind.limit : 0, ...slotArgs(kind, slots, keys.length)],
    };
  }
}

/**
 * A master found the resource held as another kind: a mistake in the program, not contention,
 * and waiting would not end it. The caller leaves the masters' queues and hears of it at once.
 */
export function throwMismatch(
  found: { resourceIndex: number; found: string } | undefined,
  resources: readonly string[],
  kind: LockKind,
  leave: () => void,
): void {
  if (!found) return;
  leave();
  throw new LockKindMismatchError(resources[found.resourceIndex]!, describeKind(kind), describeKind(found.found));
}

/** Per resource, the slot argument of extend and release scripts: `r` for a reader, or '' (none agreed). */
function slotArgs(kind: LockKind, slots: readonly number[] | undefined, count: number): string[] {
  if (kind.type !== 'permit') return Array.from({ length: count }, () => 'r');
  return Array.from({ length: count }, (_, i) => (slots?.[i] === undefined ? '' : String(slots[i])));
}

/** The error of a split round: the masters that granted other slots than the most common choice count as refusing. */
function split(
  resources: readonly string[],
  round: RoundResult,
  grants: readonly ({ slots: string } | undefined)[],
  agreed: string | undefined,
  attempt: number,
): LockHeldError {
  const others = round.outcomes.filter((o, index) => o.status === 'refused' || (o.status === 'granted' && grants[index]?.slots !== agreed));
  return new LockHeldError(resources, others.map((o) => o.node), attempt, 0);
}

/** Per resource, the slot free on most of the masters that granted (before their grant). */
function mostFree(grants: readonly ({ free: readonly string[] } | undefined)[], resources: number): string[] {
  return Array.from({ length: resources }, (_, i) => {
    const counts = new Map<string, number>();
    for (const grant of grants) for (const slot of grant?.free[i]?.split(',') ?? []) if (slot !== '') counts.set(slot, (counts.get(slot) ?? 0) + 1);
    let best = '';
    for (const [slot, count] of counts) if (count > (counts.get(best) ?? 0)) best = slot;
    return best;
  });
}

/** The slots most masters granted together, and how many did: the permit is held only by a majority of one choice. */
function agreedSlots(round: RoundResult, grants: readonly ({ slots: string } | undefined)[]): { slots: string | undefined; count: number } {
  const counts = new Map<string, number>();
  round.outcomes.forEach((outcome, index) => {
    const slots = grants[index]?.slots;
    if (outcome.status === 'granted' && slots !== undefined) counts.set(slots, (counts.get(slots) ?? 0) + 1);
  });
  let best: { slots: string | undefined; count: number } = { slots: undefined, count: 0 };
  for (const [slots, count] of counts) if (count > best.count) best = { slots, count };
  return best;
}
