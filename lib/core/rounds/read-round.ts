import { monotonicNow } from '../base/clock.js';
import { nodeTimeoutMs } from '../lock/redlock-options.js';
import type { RedisNode } from '../voters/redis-node.js';
import type { EngineRounds } from './engine-rounds.js';
import type { RoundResult } from './quorum-round.js';
import { within } from '../base/within.js';

/**
 * A read of every voting master that writes nothing (who leads an election, what a lock looks
 * like): each master's reply, or undefined where it did not answer within the node timeout (a
 * master in restart quarantine is not asked). Unlike a vote, a read waits for every master until
 * the timeout, not just for a majority: what a majority agrees on may be on the others.
 */
export async function readEveryMaster(
  rounds: EngineRounds,
  ttlMs: number,
  request: (node: RedisNode) => Promise<unknown>,
): Promise<{ replies: (unknown | undefined)[]; round: RoundResult }> {
  const replies: unknown[] = rounds.nodes.map(() => undefined);
  const timeoutMs = nodeTimeoutMs(rounds.options, ttlMs);
  const ask = rounds.vote(request);
  const started = monotonicNow();
  const round = await rounds.round(
    ttlMs,
    () => ({ granted: true }),
    (node, index) =>
      ask(node).then((reply) => {
        replies[index] = reply;
        return reply;
      }),
    'extend',
  );
  await within(Promise.allSettled(round.requests), Math.max(0, started + timeoutMs - monotonicNow()), () => undefined);
  return { replies, round };
}
