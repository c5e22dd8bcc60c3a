import { LockKindMismatchError } from '../base/errors.js';
import { describeKind, type LockKind } from '../lock/lock-kind.js';
import type { RedisNode } from '../voters/redis-node.js';
import { AckedReply } from '../voters/replica-acks.js';

// Every kind's acquire script answers {2, resource index, what holds it} when a master finds the
// resource held as another kind: a mistake in the program, not contention.

/**
 * Watches a round's raw replies for a kind mismatch ({2, resource index, what holds it}), which a
 * vote reads only as a refusal: `send` wraps the round's requests, `found` says what was seen.
 */
export function mismatchWatch(request: (node: RedisNode) => Promise<unknown>): {
  send: (node: RedisNode) => Promise<unknown>;
  found: () => { resourceIndex: number; found: string } | undefined;
} {
  let found: { resourceIndex: number; found: string } | undefined;
  const send = (node: RedisNode) =>
    request(node).then((reply) => {
      const raw = reply instanceof AckedReply ? reply.reply : reply;
      if (Array.isArray(raw) && raw.length === 3 && raw[0] === 2 && Number.isSafeInteger(raw[1]) && typeof raw[2] === 'string') {
        found = { resourceIndex: (raw[1] as number) - 1, found: raw[2] };
      }
      return reply;
    });
  return { send, found: () => found };
}

/**
 * A master found the resource held as another kind: waiting would not end it. The caller leaves
 * the masters' queues and hears of it at once.
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
