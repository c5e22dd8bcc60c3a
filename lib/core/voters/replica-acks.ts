import { UnexpectedReplyError, type RoundReply } from '../scripts/replies.js';
import { nodeTimeoutMs, type ResolvedRedlockOptions } from '../lock/redlock-options.js';
import type { MasterClient } from './clients/master-client.js';

/**
 * What a granting write (a take, an acquire, an extension, a fence write-back) must achieve
 * before its master's vote counts, with `replicaAcks` on: that many of the master's replicas
 * acknowledged it (WAIT), within `timeoutMs`.
 */
export interface ReplicaWait {
  readonly replicas: number;
  readonly timeoutMs: number;
}

/**
 * The WAIT of a round whose node timeout is `nodeTimeoutMs`: three quarters of it, so that a
 * WAIT that runs out still answers before the round's deadline and the master's outcome says
 * how many replicas acknowledged, rather than only that it was late. Never 0: WAIT 0 blocks for ever.
 */
export function replicaWait(options: ResolvedRedlockOptions, ttlMs: number): ReplicaWait | undefined {
  if (options.replicaAcks === 0) return undefined;
  return { replicas: options.replicaAcks, timeoutMs: Math.max(1, Math.floor((nodeTimeoutMs(options, ttlMs) * 3) / 4)) };
}

/** A master's reply to a granting write, and how many of its replicas acknowledged it. */
export class AckedReply {
  constructor(
    readonly reply: unknown,
    readonly acked: number,
    readonly wait: ReplicaWait,
  ) {}

  /** The vote the reply gives; a grant counts only if enough replicas acknowledged it. A refusal needs none. */
  vote(interpret: (reply: unknown) => RoundReply): RoundReply {
    const vote = interpret(this.reply);
    if (vote.granted && this.acked < this.wait.replicas) throw new ReplicaAcksError(this.acked, this.wait);
    return vote;
  }
}

/** A master granted, but too few of its replicas acknowledged the write: its vote does not count. */
export class ReplicaAcksError extends Error {
  constructor(
    readonly acked: number,
    readonly wait: ReplicaWait,
  ) {
    super(`granted, but only ${acked} of the ${wait.replicas} replicas required (replicaAcks) acknowledged the write within ${wait.timeoutMs} ms`);
  }
}

/**
 * Sends WAIT on `client` right behind the write just queued there (one connection keeps command
 * order, so it covers that write and every earlier one of the connection): how many replicas
 * acknowledged them. Handled at once, so a caller that stops at the write's own error leaves
 * no unhandled rejection behind.
 */
export function waitForReplicas(client: MasterClient, wait: ReplicaWait): Promise<number> {
  const acked = client.wait(wait.replicas, wait.timeoutMs).then((reply: unknown) => {
    if (typeof reply !== 'number' || !Number.isSafeInteger(reply) || reply < 0) throw new UnexpectedReplyError('wait', reply);
    return reply;
  });
  acked.catch(() => {});
  return acked;
}

/** The shortest of the waits of one batch's requests: each round then hears the WAIT before its deadline. */
export function shortestWait(waits: readonly ReplicaWait[]): ReplicaWait {
  return waits.reduce((a, b) => (b.timeoutMs < a.timeoutMs ? b : a));
}
