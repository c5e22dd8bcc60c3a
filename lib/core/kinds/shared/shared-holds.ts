import { monotonicNow, validityLeftMs } from '../../base/clock.js';
import { LockHeldError } from '../../base/errors.js';
import { nextFence } from '../../base/fence.js';
import { newToken } from '../../base/token.js';
import type { GuardedAcquire } from '../../lock/instrumentation-guard.js';
import type { LockKind } from '../../lock/lock-kind.js';
import { Lock, type ReleaseResult } from '../../lock/lock.js';
import { throwMismatch } from '../../rounds/kind-mismatch.js';
import { inFlight, NOTHING_FREED, refusedAt, type RoundResult } from '../../rounds/quorum-round.js';
import { extensionRound } from '../../rounds/engine-rounds.js';
import { roundFailure, type RoundFailure } from '../../rounds/round-failure.js';
import { grantedIfOne, grantedIfPositive } from '../../scripts/replies.js';
import type { RedisNode } from '../../voters/redis-node.js';
import { AckedReply, replicaWait } from '../../voters/replica-acks.js';
import { lineOf } from '../../waiting/local-hand-over.js';
import type { HandOffGrants } from '../../waiting/hand-off-grants.js';
import type { Waiter } from '../../waiting/waiter.js';
import { type AttemptCall, type Attempted, type HeldBy, type HoldKind, type KindParts } from '../hold-kind.js';
import { SHARED_ACQUIRES } from './shared-batches.js';
import { readSharedReply, SHARED_ACQUIRE_SCRIPT, SHARED_EXTEND_SCRIPT, SHARED_FENCE_SCRIPT, SHARED_RELEASE_SCRIPT, sharedVote } from './shared-scripts.js';

/**
 * How many waiting readers, or waiting callers for permits (at most `limit`), of one process
 * may talk to the masters at once for the same resources; the others wait in this process's
 * line for one of them to get its hold or give up. Unpaced, a burst of 300 readers behind a
 * writer sent 300 scripts per master at once, each scanning a queue that grew to 300 entries,
 * and the replies took longer than the node timeout: most of the burst failed with
 * QuorumUnreachableError on healthy masters. 32 abreast keeps a thousand readers within a
 * few seconds on a loaded machine (8 took three times as long), and each master's work per
 * round trip small.
 */
export const SHARED_CONTENDERS = 32;

/**
 * How many callers of a process after a shared hold may talk to the masters at once: readers
 * SHARED_CONTENDERS; permits no more than can hold at once at their weight (more could only be
 * refused). The in-memory engine's kinds take the same rule.
 */
export function sharedWidth(kind: LockKind): number {
  return kind.type === 'permit' ? Math.min(Math.floor(kind.limit / kind.permits), SHARED_CONTENDERS) : SHARED_CONTENDERS;
}

/**
 * A process's line for a shared hold of the lock keys `line`: shared holders of one kind line up
 * apart from writers, whose line is the exclusive lock's; weighted permits apart from other
 * weights, so a hold handed over within the process (LocalHandOver) always carries as many
 * permits as its new holder asked for.
 */
export function sharedLine(kind: LockKind, line: string): string {
  return kind.permits > 1 ? `${kind.marker} x${kind.permits}\n${line}` : `${kind.marker}\n${line}`;
}

/**
 * The protocol of holds that share a resource, readers (kinds/read) and permits (kinds/permit):
 * their acquire, extend and release rounds. A permit is a slot of the resource held by a
 * majority, exactly as a lock is (docs/GUARANTEES.md, "Semaphores and read-write locks"): a
 * round wins only when a majority granted the *same* slots, not merely a majority of grants.
 * No hand-over and no hand-off (those pass one exclusive lock on); a line as wide as
 * SHARED_CONTENDERS, only for callers that wait (one round alone needs no pacing).
 */
export abstract class SharedKind implements HoldKind {
  readonly width: number;

  constructor(
    protected readonly rounds: KindParts,
    readonly kind: LockKind,
  ) {
    this.width = sharedWidth(kind);
  }

  /** What the scripts are told of the limit: 0 for readers, who are not counted. */
  protected abstract get scriptLimit(): number;
  /** The slots a hold keeps, from the slots the majority agreed on; undefined: its slots are not its own (readers). */
  protected abstract slotsOf(agreed: string): number[] | undefined;
  /** Per resource, the slots argument of extend and release scripts ("1,3"). */
  protected abstract slotArgs(slots: readonly number[] | undefined, count: number): string[];

  localLine(line: string): string {
    return sharedLine(this.kind, line);
  }

  linesUp(waits: boolean): boolean {
    return waits;
  }

  holderHere(_line: string): Lock | undefined {
    return undefined;
  }

  standByMs(_line: string): number | undefined {
    return undefined;
  }

  /** Where a grant to another of its line wakes it (wakeHeads). */
  sleep(localLine: string, waiter: Waiter, pause: () => Promise<void>): Promise<void> {
    return this.rounds.localQueue.asleep(localLine, waiter, pause);
  }

  grantsFor(): HandOffGrants | undefined {
    return undefined;
  }

  handedOff(): Lock {
    throw new Error(`${this.kind.name} holds are never granted by hand-off`);
  }

  async attempt({ resources, keys, ttlMs, attempt, fencing, waiter, observer }: AttemptCall): Promise<Attempted> {
    const first = await this.#try(resources, keys, ttlMs, attempt, fencing, waiter, observer, []);
    // Masters that disagreed on the slot: once more at once, asking for the slot free on most of
    // them, once the first try's entries are gone (else they would take that slot themselves).
    if (!('preferred' in first)) return first;
    await first.cleanup;
    const second = await this.#try(resources, keys, ttlMs, attempt, fencing, waiter, observer, first.preferred);
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
    observer: GuardedAcquire | undefined,
    preferred: readonly string[],
  ): Promise<Attempted | { preferred: string[]; cleanup: Promise<unknown> }> {
    const { names, options, quorum } = this.rounds;
    const token = newToken();
    const start = monotonicNow();
    const { kind } = this;
    const marker = kind.marker;
    const n = keys.length;
    const scriptKeys = [...keys, ...resources.map((r) => names.queue(r)), ...resources.map((r) => names.holders(r))];
    if (fencing) scriptKeys.push(...resources.map((r) => names.fence(r)));
    const args = [token, ttlMs, n, waiter.id, waiter.ticket, marker, this.scriptLimit, kind.permits, ...keys.map((_, i) => preferred[i] ?? '')];
    const acks = replicaWait(options, ttlMs);
    // Per master, what it granted (a round's votes count only where they agree on the slots), and any mismatch.
    const grants: ({ slots: string; free: readonly string[] } | undefined)[] = [];
    let mismatch: { resourceIndex: number; found: string } | undefined;
    // With replicaAcks, a grant waits for its own WAIT: such requests go alone.
    const request = this.rounds.vote((node) => (acks ? node.write(SHARED_ACQUIRE_SCRIPT, scriptKeys, args, acks) : node.batched(SHARED_ACQUIRES, { keys: scriptKeys, args })));
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
    const end = monotonicNow();
    observer?.round(agreed.count, end - start);
    const left = validityLeftMs(ttlMs, start, end, options.driftFactor);
    if (agreed.count >= quorum && left > 0) {
      const slots = this.slotsOf(agreed.slots!);
      const lock = new Lock(this.rounds.engine, resources, keys, token, ttlMs, end + left, fence, kind, slots);
      this.rounds.held(lock, round, waiter, true);
      this.rounds.sharedHere.add(lineOf(keys), lock);
      // After a win, the waiter's entries where masters refused it leave their queues (they would head them).
      this.rounds.entries.withdrawWhereRefused(resources, waiter, round, '');
      if (slots) this.#dropOtherSlots(resources, keys, token, round, grants, agreed.slots);
      // Readers all fit; permits: as many more holds of this weight as the slots left free fit, on
      // every resource, by the roomiest master that granted the agreed slots.
      const room = slots ? Math.max(0, ...grants.map((grant) => (grant !== undefined && grant.slots === agreed.slots ? roomAfter(grant.free, kind.permits) : 0))) : Infinity;
      return { lock, room, outcomes: round.outcomes };
    }
    // Wherever it did not refuse, behind the grant requests still in flight; not awaited: the
    // next try goes out behind it on every connection.
    const cleanup = this.#free(resources, keys, token, undefined, ttlMs, asked, '', asked);
    if (mismatch) await cleanup;
    throwMismatch(mismatch, resources, kind, () => this.rounds.entries.leave(resources, waiter, ''));
    // A majority granted, but not the same slots: a split, not a refusal.
    if (agreed.count < quorum && round.granted >= quorum) {
      if (preferred.length === 0) return { preferred: mostFree(grants, n, kind.permits), cleanup };
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
    round: RoundResult,
    grants: readonly ({ slots: string } | undefined)[],
    agreed: string | undefined,
  ): void {
    const { keys: scriptKeys, args } = this.#releaseRequest(resources, keys, token, undefined, '');
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

  extend(lock: Lock, ttlMs: number): Promise<RoundResult> {
    const keys = [...lock.keys, ...lock.resources.map((r) => this.rounds.names.holders(r))];
    return extensionRound(this.rounds, ttlMs, SHARED_EXTEND_SCRIPT, keys, [lock.token, ttlMs, this.kind.marker, ...this.slotArgs(lock.slots, lock.keys.length)]);
  }

  async release(lock: Lock, held: HeldBy | undefined): Promise<ReleaseResult> {
    this.rounds.sharedHere.remove(lineOf(lock.keys), lock);
    const round = await this.#free(lock.resources, lock.keys, lock.token, lock.slots, lock.ttlMs, held?.round, held?.waiterId ?? '');
    return { releasedOn: round.granted, heldUntilRelease: round.granted >= this.rounds.quorum, nodes: round.outcomes };
  }

  /** Handed to another process: the hold stays on the masters, and nothing else of it is there. */
  handAway(lock: Lock): void {
    this.rounds.sharedHere.remove(lineOf(lock.keys), lock);
  }

  /**
   * Drops the hold on every master, behind the winning round's requests still in flight there
   * (an EVALSHA re-sent as EVAL after NOSCRIPT would otherwise land after the release).
   */
  #free(
    resources: readonly string[],
    keys: readonly string[],
    token: string,
    slots: readonly number[] | undefined,
    ttlMs: number,
    scriptRound: RoundResult | undefined,
    waiterId: string,
    /** The failed attempt being cleaned up: masters that had refused it by then hold nothing of it. */
    failed?: RoundResult,
  ): Promise<RoundResult> {
    const { keys: scriptKeys, args } = this.#releaseRequest(resources, keys, token, slots, waiterId);
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
    slots: readonly number[] | undefined,
    waiterId: string,
  ): { keys: string[]; args: (string | number)[] } {
    const { names } = this.rounds;
    return {
      keys: [...keys, ...resources.map((r) => names.queue(r)), ...resources.map((r) => names.holders(r))],
      args: [token, waiterId, this.kind.marker, this.scriptLimit, ...this.slotArgs(slots, keys.length)],
    };
  }
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
  return new LockHeldError(resources, others.map((o) => o.node), attempt, 0, round.outcomes);
}

/**
 * Per resource, the `permits` slots free on most of the masters that granted (before their
 * grant), the lower slot first among equals (the order the script takes free slots in).
 */
function mostFree(grants: readonly ({ free: readonly string[] } | undefined)[], resources: number, permits: number): string[] {
  return Array.from({ length: resources }, (_, i) => {
    const counts = new Map<number, number>();
    for (const grant of grants) for (const slot of grant?.free[i]?.split(',') ?? []) if (slot !== '') counts.set(Number(slot), (counts.get(Number(slot)) ?? 0) + 1);
    const best = [...counts].sort(([a, countA], [b, countB]) => countB - countA || a - b).slice(0, permits);
    return best.map(([slot]) => slot).join(',');
  });
}

/** How many more holds of `permits` slots fit in what a grant left free on every resource (its own slots were among `free`). */
function roomAfter(free: readonly string[], permits: number): number {
  return Math.min(...free.map((slots) => Math.floor(slots.split(',').filter((slot) => slot !== '').length / permits) - 1));
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
