import type { BatchedRequests, RedisNode } from '../../voters/redis-node.js';
import { AckedReply, shortestWait, waitForReplicas, type ReplicaWait } from '../../voters/replica-acks.js';
import { QUEUE_ENTRY_STAY_MS } from '../../waiting/queue-scripts.js';
import { freedOne, freedPerKey, RELEASE_ONE_SCRIPT, RELEASE_SCRIPT, TAKE_SCRIPT, TAKEN, takesPerKey } from './exclusive-scripts.js';

// The exclusive lock's two requests that come by the thousand: the uncontended first try (a
// plain SET NX) and the release. One tick's worth on one connection goes out as one command.

export interface TakeRequest {
  readonly key: string;
  readonly token: string;
  readonly ttlMs: number;
  /** With replicaAcks: the replicas that must acknowledge the take before it counts. */
  readonly acks: ReplicaWait | undefined;
}

/** One lock's compare-and-delete on a master, batched with the tick's other releases. */
export interface FreeRequest {
  readonly keys: readonly string[];
  readonly queueKeys: readonly string[];
  readonly token: string;
  /** The holder's queue entry to drop with it, '' for none. */
  readonly waiterId: string;
}

/** SET NX PX of one key: TAKEN, or the PTTL of the key in the way. With `acks`, a grant comes as an AckedReply. */
export const TAKES: BatchedRequests<TakeRequest, unknown> = {
  one: (node, item) => (item.acks ? takeAcked(node, item, item.acks) : take(node, item)),
  // One engine's requests: all of a batch ask for acknowledgements, or none does.
  many: (node, items) => (items[0]!.acks ? takesAcked(node, items) : takes(node, items)),
  apart: (node, { key, token, ttlMs }) => node.run(TAKE_SCRIPT, [key], [token, ttlMs]).then((replies) => takesPerKey(replies, 1)[0]),
};

/** Compare-and-delete of a lock's keys (RELEASE_SCRIPT): how many were ours and are freed now. */
export const FREES: BatchedRequests<FreeRequest, number> = {
  one: free,
  many: frees,
  keys: (item) => item.keys.length,
  async apart(node, request) {
    if (request.keys.length === 1) return freeOne(node, request);
    const args: (string | number)[] = [QUEUE_ENTRY_STAY_MS];
    for (let i = 0; i < request.keys.length; i++) args.push(request.token, request.waiterId);
    const freed = freedPerKey(await node.run(RELEASE_SCRIPT, [...request.keys, ...request.queueKeys], args), request.keys.length);
    return freed.reduce((sum, one) => sum + one, 0);
  },
};

/**
 * Alone: a plain command, no script to run; only a refusal costs a second one. A `then`, not an
 * async function: one promise fewer per master on every uncontended acquire.
 */
function take(node: RedisNode, { key, token, ttlMs }: TakeRequest): Promise<unknown> {
  return node.client.command('SET', [key, token, 'PX', ttlMs, 'NX']).then((reply) => (reply === 'OK' ? TAKEN : node.client.command('PTTL', [key])));
}

async function takes(node: RedisNode, items: readonly TakeRequest[]): Promise<readonly unknown[]> {
  const keys = items.map((item) => item.key);
  const args: (string | number)[] = [];
  for (const item of items) args.push(item.token, item.ttlMs);
  // EVAL, never EVALSHA: a take is never answered NOSCRIPT and re-sent, so a release may go out
  // right behind it on this connection (ExclusiveKind.release relies on it). The source is
  // a few hundred bytes for a whole tick's takes.
  return takesPerKey(await node.client.eval(TAKE_SCRIPT.source, keys.length, [...keys, ...args]), items.length);
}

/** SET NX with its WAIT pipelined behind it; a refusal needs no acknowledgement. */
async function takeAcked(node: RedisNode, { key, token, ttlMs }: TakeRequest, wait: ReplicaWait): Promise<unknown> {
  const set = node.client.command('SET', [key, token, 'PX', ttlMs, 'NX']);
  const acked = waitForReplicas(node.client, wait);
  if ((await set) === 'OK') return new AckedReply(TAKEN, await acked, wait);
  return node.client.command('PTTL', [key]);
}

/** One WAIT behind the tick's script covers every key it set: one wait for the whole batch. */
async function takesAcked(node: RedisNode, items: readonly TakeRequest[]): Promise<readonly unknown[]> {
  const wait = shortestWait(items.map((item) => item.acks!));
  const replies = takes(node, items); // the EVAL is on the connection when this returns
  const acked = waitForReplicas(node.client, wait);
  const perKey = await replies;
  const count = await acked;
  return perKey.map((reply) => new AckedReply(reply, count, wait));
}

/** Alone: one lock's keys; a one-key lock, the common case, by the lighter script. */
function free(node: RedisNode, item: FreeRequest): Promise<number> {
  if (item.keys.length > 1) return frees(node, [item]).then((freed) => freed[0]!);
  return freeOne(node, item);
}

function freeOne(node: RedisNode, item: FreeRequest): Promise<number> {
  const args = item.waiterId === '' ? [item.token] : [item.token, item.waiterId];
  return node.run(RELEASE_ONE_SCRIPT, [item.keys[0]!, item.queueKeys[0]!], args).then(freedOne);
}

async function frees(node: RedisNode, items: readonly FreeRequest[]): Promise<number[]> {
  const keys: string[] = [];
  const queueKeys: string[] = [];
  const args: (string | number)[] = [QUEUE_ENTRY_STAY_MS];
  for (const item of items) {
    item.keys.forEach((key, index) => {
      keys.push(key);
      queueKeys.push(item.queueKeys[index]!);
      args.push(item.token, item.waiterId);
    });
  }
  const freed = freedPerKey(await node.run(RELEASE_SCRIPT, [...keys, ...queueKeys], args), keys.length);
  let at = 0;
  return items.map((item) => {
    let count = 0;
    for (let i = 0; i < item.keys.length; i++) count += freed[at++]!;
    return count;
  });
}
