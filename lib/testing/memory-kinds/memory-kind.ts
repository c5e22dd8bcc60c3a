import { monotonicNow, validityLeftMs } from '../../core/base/clock.js';
import type { NodeOutcome } from '../../core/base/node-outcome.js';
import { newToken } from '../../core/base/token.js';
import type { AttemptCall, Attempted, HeldBy, HoldKind } from '../../core/kinds/hold-kind.js';
import type { LockKind } from '../../core/lock/lock-kind.js';
import { Lock, type LockEngine, type ReleaseResult } from '../../core/lock/lock.js';
import type { ResolvedRedlockOptions } from '../../core/lock/redlock-options.js';
import { throwMismatch } from '../../core/rounds/kind-mismatch.js';
import type { RoundResult } from '../../core/rounds/quorum-round.js';
import { roundFailure } from '../../core/rounds/round-failure.js';
import type { LocalQueue } from '../../core/waiting/local-queue.js';
import type { Waiter } from '../../core/waiting/waiter.js';
import { IN_MEMORY_MASTER, UNREACHABLE_OUTCOME, type MemoryLockStore } from '../memory-lock-store.js';

/** What a kind over the stand-in master uses of its engine. */
export interface MemoryKindParts {
  readonly engine: LockEngine;
  readonly store: MemoryLockStore;
  readonly options: ResolvedRedlockOptions;
  readonly localQueue: LocalQueue;
  /** A new hold, held since `since` (monotonic ms): registered as the engine registers its locks. */
  held(lock: Lock, round: RoundResult | undefined, waiter: Waiter, queuing: boolean, since?: number): void;
}

/** A lock kind over the stand-in master (memory-kinds/), and what InMemoryRedlock's controls need of it. */
export interface MemoryHoldKind extends HoldKind {
  /** The master forgets `token`'s hold on `key`, as when it expired there or was deleted (loseLock). */
  forget(key: string, token: string): void;
}

/** What an attempt's script found on the stand-in master (a kind's take, as its Lua would answer). */
export type Take =
  | { readonly granted: true; readonly slots?: number[]; readonly room: number }
  /** `waitMs`: how long the longest-lived key in the way lives on (undefined: none that expires). */
  | { readonly granted: false; readonly waitMs: number | undefined }
  /** The resource is held as another kind: never waited for. */
  | { readonly granted: false; readonly mismatch: { readonly resourceIndex: number; readonly found: string } };

/**
 * One acquire attempt of `kind` on the stand-in master, judged as a real round is: `take` (atomic,
 * as a script) with a new token, a fence when asked for, and a lock only while validity is left;
 * a grant that comes with none is undone (`undo`), as a real round's cleanup frees it.
 */
export function attemptOn(
  parts: MemoryKindParts,
  kind: LockKind,
  { resources, keys, ttlMs, attempt, fencing, waiter, observer }: AttemptCall,
  take: (token: string) => Take,
  undo: (token: string) => void,
): Attempted {
  const { store, options } = parts;
  const start = monotonicNow();
  const token = newToken();
  const taken: Take = store.reachable ? take(token) : { granted: false, waitMs: undefined };
  if ('mismatch' in taken) throwMismatch(taken.mismatch, resources, kind, () => store.leave(keys, waiter.id));
  const fence = taken.granted && fencing ? store.raiseFence(keys, options.fenceTimeFloor) : undefined;
  const end = monotonicNow();
  observer?.round(taken.granted ? 1 : 0, end - start);
  const left = validityLeftMs(ttlMs, start, end, options.driftFactor);
  if (taken.granted && left > 0) {
    const lock = new Lock(parts.engine, resources, keys, token, ttlMs, end + left, fence, kind, taken.slots);
    parts.held(lock, undefined, waiter, false, end);
    return { lock, room: taken.room, outcomes: [{ node: IN_MEMORY_MASTER, status: 'granted' }] };
  }
  if (taken.granted) undo(token);
  const outcome: NodeOutcome = !store.reachable
    ? UNREACHABLE_OUTCOME
    : { node: IN_MEMORY_MASTER, status: taken.granted ? 'granted' : 'refused', value: 'waitMs' in taken ? (taken.waitMs ?? -1) : undefined };
  return roundFailure(resources, roundOf(outcome), 1, left, attempt);
}

/** An extension on the stand-in master: `renew` (atomic, as a script) says whether the hold still stood, and is now renewed. */
export async function extendOn(store: MemoryLockStore, renew: () => boolean): Promise<RoundResult> {
  // A round: the master answers after this turn, as a real one would.
  await Promise.resolve();
  if (!store.reachable) return roundOf(UNREACHABLE_OUTCOME);
  return roundOf({ node: IN_MEMORY_MASTER, status: renew() ? 'granted' : 'refused' });
}

/**
 * A release on the stand-in master: `free` (atomic, as a script) drops the hold, and says whether
 * it still stood; the holder's queue entries go with it. Out of reach, the keys stay until they expire.
 */
export async function releaseOn(store: MemoryLockStore, lock: Lock, held: HeldBy | undefined, free: () => boolean): Promise<ReleaseResult> {
  await Promise.resolve();
  if (!store.reachable) return { releasedOn: 0, heldUntilRelease: false, nodes: [UNREACHABLE_OUTCOME] };
  if (held) store.leave(lock.keys, held.waiterId);
  const freed = free();
  return { releasedOn: freed ? 1 : 0, heldUntilRelease: freed, nodes: [{ node: IN_MEMORY_MASTER, status: freed ? 'granted' : 'refused' }] };
}

/** A hold handed to another process (`lock.handOver()`): it stays on the stand-in master; the holder's queue entries go. */
export function handAwayOn(store: MemoryLockStore, lock: Lock, held: HeldBy | undefined): void {
  if (held) store.leave(lock.keys, held.waiterId);
}

/**
 * What a kind over the stand-in master answers the acquire loop between its rounds: no holder
 * in this process to wait for, and no hand-off (a release frees the keys and wakes the waiters).
 */
export abstract class MemoryKind implements Pick<HoldKind, 'holderHere' | 'standByMs' | 'sleep' | 'grantsFor' | 'handedOff'> {
  abstract readonly kind: LockKind;

  holderHere(): Lock | undefined {
    return undefined;
  }

  standByMs(): number | undefined {
    return undefined;
  }

  sleep(_localLine: string, _waiter: Waiter, pause: () => Promise<void>): Promise<void> {
    return pause();
  }

  grantsFor(): undefined {
    return undefined;
  }

  handedOff(): Lock {
    throw new Error(`${this.kind.name} holds are never granted by hand-off in memory`);
  }
}

/** The longer of two waits, either unknown. */
export function longer(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.max(a, b);
}

function roundOf(outcome: NodeOutcome): RoundResult {
  return { outcomes: [outcome], granted: outcome.status === 'granted' ? 1 : 0, refused: outcome.status === 'refused' ? 1 : 0, requests: [] };
}
