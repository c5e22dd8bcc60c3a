import type { NodeOutcome } from './node-outcome.js';
import type { RedisNode } from './redis-node.js';
import { errorText, NodeQuarantinedError } from './redis-node.js';

export interface RoundReply {
  granted: boolean;
  value?: number;
}

export interface RoundOptions {
  readonly quorum: number;
  /** One deadline for the whole round: a node that has not answered by then counts as timed out. */
  readonly timeoutMs: number;
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
 */
export function runRound(
  nodes: readonly RedisNode[],
  options: RoundOptions,
  send: (node: RedisNode, index: number) => Promise<unknown>,
  interpret: (reply: unknown) => RoundReply,
): Promise<RoundResult> {
  const total = nodes.length;
  const outcomes: NodeOutcome[] = nodes.map((node) => ({ node: node.name, status: 'pending' }));
  let granted = 0;
  let refused = 0;
  let answered = 0;
  const requests: Promise<unknown>[] = [];

  return new Promise<RoundResult>((resolve) => {
    let settled = false;
    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ outcomes, granted, refused, requests });
    };
    const decided = () => granted >= options.quorum || answered - granted > total - options.quorum;

    const timer = setTimeout(() => {
      for (const outcome of outcomes) {
        if (outcome.status === 'pending') {
          outcome.status = 'timeout';
          outcome.error = `no reply within ${options.timeoutMs} ms`;
        }
      }
      finish();
    }, options.timeoutMs);

    const failed = (outcome: NodeOutcome, error: unknown) => {
      if (error instanceof NodeQuarantinedError) {
        outcome.status = 'quarantined';
        outcome.quarantinedForMs = Math.ceil(error.remainingMs);
      } else {
        outcome.status = 'error';
      }
      outcome.error = errorText(error);
      answered++;
      if (decided()) finish();
    };

    nodes.forEach((node, index) => {
      const outcome = outcomes[index]!;
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
          let vote: RoundReply;
          try {
            vote = interpret(reply);
          } catch (error) {
            // A reply of the wrong shape is this master's error in the round, never the caller's crash.
            failed(outcome, error);
            return;
          }
          const { granted: ok, value } = vote;
          outcome.status = ok ? 'granted' : 'refused';
          if (value !== undefined) outcome.value = value;
          answered++;
          if (ok) granted++;
          else refused++;
          if (decided()) finish();
        },
        (error: unknown) => {
          if (outcome.status === 'pending') failed(outcome, error);
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

function noop(): void {}
