import { resourcesOf, type SlotCall } from './lua-script.js';

// How replies are read: each shape checked, never trusted. The readers every kind shares live
// here; a kind's own readers live with its scripts.

/** What one master's reply means in a round: a vote for or against, and a number it carries (a fence, a wait). */
export interface RoundReply {
  granted: boolean;
  value?: number;
}

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

export function isInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value);
}

/** Extend and fence replies: 1 or 0. */
export function grantedIfOne(reply: unknown): RoundReply {
  if (reply !== 0 && reply !== 1) throw new UnexpectedReplyError('extend', reply);
  return { granted: reply === 1 };
}

/** Release replies: how many keys were freed. */
export function grantedIfPositive(reply: unknown): RoundReply {
  if (!isInteger(reply) || reply < 0) throw new UnexpectedReplyError('release', reply);
  return { granted: reply > 0 };
}

/** Per-slot replies of a 1-or-0 script (extend, fence): 1 only where every slot said 1. */
export function mergeAllOnes(_calls: readonly SlotCall[], replies: readonly unknown[]): { reply: unknown; undo: SlotCall[] } {
  return { reply: replies.every((reply) => reply === 1) ? 1 : 0, undo: [] };
}

/**
 * An acquire's per-slot replies as one. Granted only where every slot granted: {1, the highest
 * fence counter}, followed, when `perResource` says so (readers and permits), by the slot, then
 * the free slots, of each resource in the request's order. Otherwise the slots that granted are
 * undone, and the reply is a kind mismatch ({2, the resource's index in the whole request, what
 * holds it}) if a slot found one, else a refusal with the longest wait of the slots that refused.
 */
export function mergeAcquire(
  name: string,
  calls: readonly SlotCall[],
  replies: readonly unknown[],
  perResource: boolean,
): { reply: unknown; undo: SlotCall[] } {
  const granted = replies.map((reply) => Array.isArray(reply) && reply[0] === 1);
  const values = replies.map((reply) => (Array.isArray(reply) && typeof reply[1] === 'number' ? reply[1] : -2));
  const undo = calls.filter((_, i) => granted[i]);
  const mismatch = replies.findIndex((reply) => Array.isArray(reply) && reply[0] === 2);
  if (mismatch !== -1) {
    const [, at, found] = replies[mismatch] as unknown[];
    const index = typeof at === 'number' ? calls[mismatch]!.indexes[at - 1] : undefined;
    if (index === undefined) throw new UnexpectedReplyError(name, replies[mismatch]);
    return { reply: [2, index + 1, found], undo };
  }
  if (undo.length < calls.length) return { reply: [0, Math.max(...values.filter((_, i) => !granted[i]))], undo };
  const reply: unknown[] = [1, Math.max(...values)];
  if (perResource) {
    const total = resourcesOf(calls);
    calls.forEach((call, c) => {
      const perSlot = replies[c] as unknown[];
      const n = call.indexes.length;
      call.indexes.forEach((index, k) => {
        reply[2 + index] = perSlot[2 + k];
        reply[2 + total + index] = perSlot[2 + n + k];
      });
    });
  }
  return { reply, undo: [] };
}
