import type { BatchedRequests, RedisNode } from '../../voters/redis-node.js';
import { UnexpectedReplyError } from '../../scripts/replies.js';
import { SHARED_ACQUIRE_SCRIPT, SHARED_ACQUIRES_SCRIPT } from './shared-scripts.js';

/** One reader's or permit's acquire on a master: SHARED_ACQUIRE_SCRIPT's keys and arguments. */
export interface SharedAcquireRequest {
  readonly keys: readonly string[];
  readonly args: readonly (string | number)[];
}

/**
 * Readers and permits ask together: a writer's release wakes every reader of a process queued
 * behind it, and a process's callers standing by go with them, so one tick holds several
 * acquires for one connection. Those after the first go out as one call (SHARED_ACQUIRES_SCRIPT),
 * which runs them on the master one after the other, as it would have run them sent apart:
 * one write and one reply for the master and this process instead of one each.
 */
export const SHARED_ACQUIRES: BatchedRequests<SharedAcquireRequest, unknown> = {
  one: acquire,
  many: acquires,
  keys: (item) => item.keys.length,
  // A Cluster voter runs the one script per hash slot itself.
  apart: acquire,
};

function acquire(node: RedisNode, { keys, args }: SharedAcquireRequest): Promise<unknown> {
  return node.run(SHARED_ACQUIRE_SCRIPT, keys, args);
}

async function acquires(node: RedisNode, items: readonly SharedAcquireRequest[]): Promise<readonly unknown[]> {
  const keys: string[] = [];
  const args: (string | number)[] = [items.length];
  for (const item of items) args.push(item.keys.length, item.args.length);
  for (const item of items) {
    for (const key of item.keys) keys.push(key);
    for (const arg of item.args) args.push(arg);
  }
  const replies = await node.run(SHARED_ACQUIRES_SCRIPT, keys, args);
  if (!Array.isArray(replies) || replies.length !== items.length) throw new UnexpectedReplyError('shared-acquires', replies);
  return replies;
}
