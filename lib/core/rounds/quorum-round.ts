import { monotonicNow } from '../base/clock.js';
import type { MasterFailure } from '../lock/instrumentation.js';
import type { NodeOutcome } from '../base/node-outcome.js';
import type { RedisNode } from '../voters/redis-node.js';
import { errorText, NodeQuarantinedError, NodeReconnectedError } from '../voters/redis-node.js';
import { AckedReply } from '../voters/replica-acks.js';
import { cancelDeadline, setDeadline } from './round-deadlines.js';
import type { RoundReply } from '../scripts/replies.js';

export type { RoundReply };

export interface RoundOptions {
  readonly quorum: number;
  /**
   * One deadline for the whole round: a node that has not answered by then counts as timed out.
   * Time this process itself was too busy to read replies does not count (see runRound).
   */
  readonly timeoutMs: number;
  /** However busy this process, the round waits no longer than this in all. Default: timeoutMs. */
  readonly latestMs?: number;
  /**
   * Told once per node whose request failed, or was not answered by the deadline, whether the
   * round waited for it or was decided without it (a straggler's outcome still lands when it
   * answers; only the report says it was late). Quarantined votes are not failures of the request.
   */
  readonly onFailure?: (index: number, failure: MasterFailure) => void;
}

export interface RoundResult {
  /** One entry per node, in node order. Entries of stragglers keep updating after the decision. */
  readonly outcomes: NodeOutcome[];
  readonly granted: number;
  /** Nodes that answered that the key is not ours. */
  readonly refused: number;
  /** Per node, the request itself: still running after the decision for stragglers. */
  readonly requests: readonly Promise<unknown>[];
}

/**
 * Sends one request to every node at once and settles as soon as the result is decided:
 * a quorum granted, or so many refused or failed that a quorum is impossible, or the round's
 * deadline passed. Requests still in flight are not cancelled (they cannot be); their
 * outcomes keep landing in `outcomes`, and callers release on every node regardless.
 *
 * The deadline is the masters', not this process's: a node counts as silent only once this
 * process has been free to read its reply. A reply that came while the event loop was busy
 * (a burst of calls, a long synchronous task, a starved CPU) waits unread in the socket, and
 * the deadline's timer runs before the socket is read. So the verdict waits for the next read
 * of the sockets (setImmediate runs after the loop's poll for I/O); and a timer that fires late
 * by more than LATE_SLACK of the timeout moves the deadline by as long as it was late (the
 * process was busy, so replies may have come meanwhile and more may still be unread), up to
 * `latestMs` in all. A round whose masters answer costs nothing of this: its deadline is
 * cancelled (round-deadlines.ts: one timer serves every round).
 */
/**
 * A deadline timer late by more than this share of the node timeout (and LATE_MIN_MS) found this
 * process busy, not a master silent: the usual lateness of a timer, a millisecond or two, never
 * moves a deadline, so a dead master costs a caller what the node timeout says.
 */
const LATE_SLACK = 0.25;
const LATE_MIN_MS = 5;

export function runRound(
  nodes: readonly RedisNode[],
  options: RoundOptions,
  send: (node: RedisNode, index: number) => Promise<unknown>,
  interpret: (reply: unknown) => RoundReply,
): Promise<RoundResult> {
  const total = nodes.length;
  // Built by push, not map: map's arrays are holey, and mixing them with packed ones deopts the round.
  const outcomes: NodeOutcome[] = [];
  for (const node of nodes) outcomes.push({ node: node.name, status: 'pending' });
  let granted = 0;
  let refused = 0;
  let answered = 0;
  const requests: Promise<unknown>[] = [];
  const onFailure = options.onFailure;
  let reported: boolean[] | undefined;
  const report = onFailure
    ? (index: number, failure: MasterFailure) => {
        if (reported?.[index]) return;
        (reported ??= [])[index] = true;
        onFailure(index, failure);
      }
    : undefined;

  return new Promise<RoundResult>((resolve) => {
    let settled = false;
    const finish = () => {
      if (settled) return;
      settled = true;
      // With a listener, the round's own timer keeps watching the stragglers until they have all
      // answered or the deadline says they are late: no clock read per reply, no second timer.
      if (!report || answered === total) cancelDeadline(timer);
      resolve({ outcomes, granted, refused, requests });
    };
    const decided = () => granted >= options.quorum || answered - granted > total - options.quorum;
    const counted = () => {
      answered++;
      if (!settled) {
        if (decided()) finish();
      } else if (answered === total) {
        cancelDeadline(timer); // the last straggler, in time
      }
    };

    const latestMs = options.latestMs ?? options.timeoutMs;
    const startedAt = monotonicNow();
    let dueAt = startedAt + options.timeoutMs;
    /** Set once the deadline has passed for this process too: the verdict follows the next read of the sockets. */
    let expiring = false;
    // One callback for the timer and the verdict after it: a round allocates no more closures than before.
    const deadline = () => {
      if (!expiring) {
        const now = monotonicNow();
        const lateMs = now - dueAt;
        const moreMs = Math.min(lateMs, startedAt + latestMs - now);
        if (lateMs > Math.max(LATE_MIN_MS, options.timeoutMs * LATE_SLACK) && moreMs > 0) {
          dueAt = now + moreMs;
          timer = setDeadline(moreMs, deadline);
        } else {
          expiring = true;
          setImmediate(deadline);
        }
        return;
      }
      outcomes.forEach((outcome, index) => {
        if (outcome.status !== 'pending') return;
        // A straggler of a round decided without it: late, and its outcome still lands when it answers.
        if (!settled) {
          outcome.status = 'timeout';
          outcome.error = `no reply within ${options.timeoutMs} ms`;
        }
        report?.(index, 'timeout');
      });
      finish();
    };
    let timer = setDeadline(options.timeoutMs, deadline);

    const failed = (outcome: NodeOutcome, index: number, error: unknown) => {
      if (error instanceof NodeQuarantinedError) {
        outcome.status = 'quarantined';
        outcome.quarantinedForMs = Math.ceil(error.remainingMs);
      } else {
        outcome.status = 'error';
        report?.(index, 'error');
      }
      outcome.error = errorText(error);
      counted();
    };

    nodes.forEach((node, index) => {
      const outcome = outcomes[index]!;
      // ioredis re-sends a request in flight when the connection breaks, over the next connection,
      // maybe to another server (a restart, a failover) that nobody identified: its reply is no vote.
      // (node-redis fails such a request instead; the count of closes catches both.)
      const connection = node.connection;
      let request: Promise<unknown>;
      try {
        request = send(node, index);
      } catch (error) {
        request = Promise.reject(error);
      }
      requests.push(request);
      request.then(
        (reply) => {
          if (outcome.status !== 'pending') return; // too late: already counted as timed out
          if (node.connection !== connection) {
            failed(outcome, index, new NodeReconnectedError());
            return;
          }
          let vote: RoundReply;
          try {
            // With replicaAcks, a grant counts only once enough replicas acknowledged it.
            vote = reply instanceof AckedReply ? reply.vote(interpret) : interpret(reply);
          } catch (error) {
            // A reply of the wrong shape is this master's error in the round, never the caller's crash.
            failed(outcome, index, error);
            return;
          }
          const { granted: ok, value } = vote;
          outcome.status = ok ? 'granted' : 'refused';
          if (value !== undefined) outcome.value = value;
          if (ok) granted++;
          else refused++;
          counted();
        },
        (error: unknown) => {
          if (outcome.status === 'pending') failed(outcome, index, error);
        },
      );
    });
  });
}

/**
 * Settles once node `index`'s request of `round` has finished, or undefined when it already
 * has: what a later request on that node must wait for so as not to overtake it.
 */
export function inFlight(round: RoundResult | undefined, index: number): Promise<void> | undefined {
  const status = round?.outcomes[index]?.status;
  if (status !== 'pending' && status !== 'timeout') return undefined;
  return round!.requests[index]!.then(noop, noop);
}

/**
 * Whether node `index` refused `round`: every acquire script refuses before it writes anything
 * (a take's SET NX, the scripts' grants), so a failed attempt has nothing to clean up there.
 */
export function refusedAt(round: RoundResult, index: number): boolean {
  return round.outcomes[index]?.status === 'refused';
}

/** The reply of a release not sent to a master that refused: nothing freed there. */
export const NOTHING_FREED: Promise<number> = Promise.resolve(0);

function noop(): void {}
