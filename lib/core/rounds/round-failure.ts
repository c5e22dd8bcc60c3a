import { isFailure, LockHeldError, QuorumUnreachableError, type RedlockError } from '../base/errors.js';
import type { RoundResult } from './quorum-round.js';

export interface RoundFailure {
  readonly error: RedlockError;
  /** Worth another round after a pause. */
  readonly retryable: boolean;
  /**
   * Settles once the failed attempt's cleanup round has its outcome. A retry need not wait for
   * it (its requests queue behind the cleanup on each master's connection, but for a cleanup
   * that waits for a straggling script: overtaking that costs a refusal there, never safety); a
   * caller about to give up does, so that an acquire that rejects leaves nothing behind.
   */
  readonly cleanup?: Promise<unknown>;
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
  return { error: new LockHeldError(resources, refusedBy, attempt, retryAfter, round.outcomes), retryable: true };
}
