import { isFailure, LockHeldError, QuorumUnreachableError, type RedlockError } from './errors.js';
import type { RoundResult } from './quorum-round.js';
import type { RedisNode } from './redis-node.js';

export interface RoundFailure {
  readonly error: RedlockError;
  /** Worth another round after a pause. */
  readonly retryable: boolean;
  /**
   * Settles once the failed attempt's partial grants are cleaned up. A retry need not wait for
   * it (it goes out behind the cleanup on each master's connection); a caller about to give up
   * does, so that an acquire that rejects leaves nothing behind.
   */
  readonly cleanup?: Promise<void>;
  /** Per master, the part of that cleanup that waits for a straggler: the next request there goes behind it. */
  readonly behind?: Behind;
}

/**
 * Per master, a cleanup not yet sent there (it waits for the failed attempt's straggling
 * request to answer first). A cleanup sent at once needs no entry: the next request on that
 * master's connection queues behind it anyway.
 */
export type Behind = readonly (Promise<void> | undefined)[];

/**
 * Settles when `request` does, and never rejects: what a later request waits for. A failed
 * cleanup is the round's to report; a rejection here, with nobody left to listen (the caller
 * got its lock or gave up), would be unhandled and end the process.
 */
export function settled(request: Promise<unknown>): Promise<void> {
  return request.then(noop, noop);
}

function noop(): void {}

/** `send`, for master `index`, once what it must follow there has settled (at once when nothing). */
export function sendBehind<T>(
  behind: Behind | undefined,
  send: (node: RedisNode, index: number) => Promise<T>,
): (node: RedisNode, index: number) => Promise<T> {
  if (!behind || !behind.some((prior) => prior !== undefined)) return send;
  return (node, index) => {
    const prior = behind[index];
    const go = () => send(node, index);
    return prior ? prior.then(go) : go();
  };
}

/** Both cleanups' parts per master, for an attempt that made two tries. */
export function bothBehind(first: Behind | undefined, second: Behind | undefined): Behind | undefined {
  if (!first) return second;
  if (!second) return first;
  return Array.from({ length: Math.max(first.length, second.length) }, (_, i) =>
    first[i] && second[i] ? Promise.all([first[i], second[i]]).then(noop) : (first[i] ?? second[i]),
  );
}

/**
 * Why an acquire round failed. Too few masters answering is not worth waiting out (the engine
 * gives callers a fast failure after a couple of such rounds); contention, a quarantine whose
 * end restores the quorum, and a round too slow for the ttl are.
 */
export function roundFailure(
  resources: readonly string[],
  round: RoundResult,
  quorum: number,
  validityLeftMs: number,
  attempt: number,
): RoundFailure {
  const total = round.outcomes.length;
  const failed = round.outcomes.filter((o) => isFailure(o.status)).length;
  if (failed > total - quorum) {
    // Worth waiting only for a quarantine, which ends by itself (at `retryAfterMs`).
    const error = new QuorumUnreachableError(resources, quorum, round.outcomes);
    return { error, retryable: error.retryAfterMs !== undefined };
  }
  if (round.granted >= quorum) {
    const detail = `granted with ${Math.round(validityLeftMs)} ms of validity left, which is no validity`;
    return { error: new QuorumUnreachableError(resources, quorum, round.outcomes, detail), retryable: true };
  }
  const refusals = round.outcomes.filter((o) => o.status === 'refused');
  const retryAfter = refusals.reduce<number | undefined>(
    (max, o) => (o.value !== undefined && o.value >= 0 ? Math.max(max ?? 0, o.value) : max),
    undefined,
  );
  const refusedBy = refusals.map((o) => o.node);
  return { error: new LockHeldError(resources, refusedBy, attempt, retryAfter), retryable: true };
}
