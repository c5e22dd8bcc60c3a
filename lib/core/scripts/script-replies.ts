import type { RoundReply } from '../rounds/quorum-round.js';
import { TAKEN } from './lua-scripts.js';

// How the lock scripts' replies (lua-scripts.ts) are read: each shape checked, never trusted.

/**
 * A master answered with something the script cannot return: a misbehaving server or proxy.
 * That master's outcome in the round is an error; the reply is described, never echoed.
 */
export class UnexpectedReplyError extends Error {
  constructor(script: string, reply: unknown) {
    super(`unexpected reply to ${script}: ${shapeOf(reply)}`);
  }
}

function shapeOf(reply: unknown): string {
  if (Array.isArray(reply)) return `array of ${reply.length}`;
  if (reply === null) return 'nil';
  if (typeof reply === 'number') return Number.isInteger(reply) ? 'an integer' : 'a number';
  if (Buffer.isBuffer(reply)) return 'bytes';
  return typeof reply;
}

function isInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value);
}

/** ACQUIRE_SCRIPT replies, as votes: {1, fence} or {0, wait}; a kind mismatch {2, i, marker} refuses (the caller reads it apart). */
export function interpretAcquire(reply: unknown): RoundReply {
  if (Array.isArray(reply) && reply.length === 3 && reply[0] === 2) return { granted: false };
  if (!Array.isArray(reply) || reply.length !== 2 || (reply[0] !== 0 && reply[0] !== 1) || !isInteger(reply[1])) {
    throw new UnexpectedReplyError('acquire', reply);
  }
  return { granted: reply[0] === 1, value: reply[1] };
}

/** Replies to a take (RedisNode.take): TAKEN, or how long the blocking key still lives (a PTTL). */
export function interpretTake(reply: unknown): RoundReply {
  if (reply === TAKEN) return { granted: true };
  if (!isInteger(reply) || reply < -2) throw new UnexpectedReplyError('take', reply);
  return { granted: false, value: reply };
}

/** CONFIRM_SCRIPT replies: how long the key still lives with our token, or undefined when it does not hold it. */
export function confirmedPttl(reply: unknown): number | undefined {
  if (!isInteger(reply)) throw new UnexpectedReplyError('confirm', reply);
  return reply > 0 ? reply : undefined;
}

/** EXTEND_SCRIPT and FENCE_SCRIPT replies: 1 or 0. */
export function grantedIfOne(reply: unknown): RoundReply {
  if (reply !== 0 && reply !== 1) throw new UnexpectedReplyError('extend', reply);
  return { granted: reply === 1 };
}

/** RELEASE_SCRIPT replies, summed per lock by RedisNode.free: keys freed. */
export function grantedIfPositive(reply: unknown): RoundReply {
  if (!isInteger(reply) || reply < 0) throw new UnexpectedReplyError('release', reply);
  return { granted: reply > 0 };
}

/** RELEASE_SCRIPT's per-key replies for `count` keys: each 1 (freed) or 0. */
export function freedPerKey(reply: unknown, count: number): readonly number[] {
  if (!Array.isArray(reply) || reply.length !== count || !reply.every((freed) => freed === 0 || freed === 1)) {
    throw new UnexpectedReplyError('release', reply);
  }
  return reply as number[];
}

/** TAKE_SCRIPT's per-key replies for `count` keys: TAKEN or a PTTL each, read by interpretTake. */
export function takesPerKey(reply: unknown, count: number): readonly unknown[] {
  if (!Array.isArray(reply) || reply.length !== count) throw new UnexpectedReplyError('take', reply);
  return reply;
}
