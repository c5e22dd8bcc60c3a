import { blocks, resourcesOf, sameArgs, script, withCount, type SlotCall } from '../../scripts/lua-script.js';
import { raiseFencesLua } from '../../scripts/fence-lua.js';
import { isInteger, mergeAcquire, mergeAllOnes, UnexpectedReplyError, type RoundReply } from '../../scripts/replies.js';
import { QUEUE_ENTRY_STAY_MS, QUEUE_LUA } from '../../waiting/queue-scripts.js';

// The exclusive lock's scripts (a writer; limit 1), with how each is read and how a Redis
// Cluster voter splits it by hash slot.

/**
 * All or nothing on this node: every key is free, reserved for us, or already ours (a
 * retried request landing twice), and no live waiter is queued ahead of us, or nothing is
 * locked.
 *
 * A caller that cannot have the lock enlists in each resource's fair queue with its ticket,
 * which it chose once for all masters, so every master orders waiters alike; a free lock goes
 * only to the lowest live ticket, and a release reserves it for that waiter. An entry dies at
 * its deadline unless its waiter comes back, so a crashed waiter blocks no one for long.
 *
 * Returns {1, fence} on grant: for a fenced lock the highest fence counter of the resources
 * here, read in the same script as the SET so no holder's write-back slips between; else 0.
 * Returns {2, resource index, marker} when a semaphore holds a resource (LockKindMismatchError).
 * Returns {0, wait} on refusal: how long until the blocking key expires (the holder's PTTL, or
 * a reservation's), or with no key in the way until the queue's head entry dies: how long a
 * crashed holder or head can stall the caller, and what it may be told to wait (Retry-After).
 * A hand-off waiter (ARGV[7], its token prefix, not '') enlists with its grant (grantTag), so
 * a release can hand it the key; a key holding one of its own earlier tokens (granted by such a
 * hand-off, or by an earlier round whose cleanup has not landed) is its own: this round takes
 * it over with its token, so a waiter never holds a master under two tokens that it counts apart.
 * KEYS: n lock keys, n queue keys, then n fence keys when fenced.
 * ARGV: token, ttl ms, n, waiter id, ticket, how long an entry lives without its waiter (ms),
 * hand-off token prefix ('' for none), which request of the waiter this is (its anchor).
 */
export const ACQUIRE_SCRIPT = script(
  'acquire',
  QUEUE_LUA +
    `local n = tonumber(ARGV[3])
local me, ticket, stay = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local prefix = ARGV[7] or ''
local reservation = me ~= '' and ('~' .. me) or nil
local wait = -2
local reserved = {}
for i = 1, n do
  local owner = redis.call('GET', KEYS[i])
  -- A semaphore's holders live here (their marker): another family, never waited for.
  if owner and string.sub(owner, 1, 2) == '*s' then return {2, i, owner} end
  if owner and (owner == reservation or (prefix ~= '' and string.sub(owner, 1, #prefix) == prefix)) then
    reserved[i] = true
  elseif owner and owner ~= ARGV[1] then
    local pttl = redis.call('PTTL', KEYS[i])
    if pttl > wait then wait = pttl end
  end
end
local queued, headWait, queues = aheadOf(n, reserved, me, ticket)
if wait ~= -2 or queued then
  -- The holder's pttl when a key is held: never more than its lock can still run, whoever waits.
  -- With no holder, how long the head's entry lives (its waiter takes the lock before that or dies).
  if wait == -2 then wait = headWait end
  enlist(n, me, ARGV[5], wait, stay, prefix ~= '' and grantTag(ARGV[1], ARGV[2], ARGV[8]) or '')
  return {0, wait}
end
local fence = 0
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  if queues[i] and me ~= '' then redis.call('HDEL', KEYS[n + i], me) end
  if #KEYS > 2 * n then
    local counter = tonumber(redis.call('GET', KEYS[2 * n + i]) or '0')
    if counter and counter > fence then fence = counter end
  end
end
return {1, fence}`,
  {
    votes: true,
    // ARGV: token, ttl, n, waiter id, ticket, stay.
    layout: blocks({ argv: 2 }, withCount(2)),
    merge: (calls, replies) => mergeAcquire('acquire', calls, replies, false),
    // The lock's compare-and-delete on the lock and queue keys, not the fence counters.
    undo: (call) => ({ script: RELEASE_SCRIPT, keys: call.keys.slice(0, 2 * call.indexes.length), args: releaseArgs(call) }),
  },
);

/**
 * The uncontended first try, for many single-key locks at once (a tick's batch, one call per master):
 * SET NX PX per key, each with its own token and ttl. A plain SET NX cannot see the fair
 * queue, so it is fair only because a key is never free while someone lives in its queue
 * (a release reserves it for the head; see handOn). Returns per key TAKEN, or the blocking
 * key's PTTL.
 * KEYS: the lock keys. ARGV: per key, token then ttl ms.
 */
export const TAKE_SCRIPT = script(
  'take',
  `local replies = {}
for i = 1, #KEYS do
  if redis.call('SET', KEYS[i], ARGV[2 * i - 1], 'NX', 'PX', ARGV[2 * i]) then
    replies[i] = 'taken'
  else
    replies[i] = redis.call('PTTL', KEYS[i])
  end
end
return replies`,
  { votes: true },
);
/** TAKE_SCRIPT's reply for a key it set. */
export const TAKEN = 'taken';

/**
 * Second phase of a fenced acquisition: raises each resource's fence counter to the new fence,
 * but only while this node still holds every lock key with our token. A write-back landing
 * after our key expired could follow the next holder's read and break monotonicity.
 * The counter expires after `expire` ms (0: never): once the wall-clock floor has overtaken
 * it, the next holder's token is higher without it (see docs/GUARANTEES.md).
 * KEYS: n lock keys, n queue keys, n fence keys. ARGV: token, fence, n, expire ms. Returns 1 or 0.
 */
export const FENCE_SCRIPT = script(
  'fence',
  `local n = tonumber(ARGV[3])
for i = 1, n do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
${raiseFencesLua('2 * n')}
return 1`,
  // ARGV: token, fence, n, expire.
  { votes: true, layout: blocks({ argv: 2 }, withCount(2)), merge: mergeAllOnes },
);

/**
 * Extends only if every key still holds our token, so a lock that was partly taken over is
 * never stretched on the keys that remain. Returns 1 on grant, 0 otherwise.
 * KEYS: the lock keys. ARGV[1]: token, ARGV[2]: new ttl in ms.
 */
export const EXTEND_SCRIPT = script(
  'extend',
  `for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1`,
  // KEYS: the lock keys. ARGV: token, ttl.
  { votes: true, layout: blocks({ perResource: 1 }, sameArgs), merge: mergeAllOnes },
);

/**
 * Compare-and-delete per key: never frees a key another owner holds, so releasing a lock that
 * expired and was taken over is harmless. Idempotent, so it is safe to repeat when a reply was
 * lost. Also drops the holder's own queue entry (left on masters that refused it in the winning
 * round); a freed key goes to the queue's head (handOn), whom alone it wakes. Serves many locks
 * of one tick at once: each key carries its own token and waiter id.
 * Returns per key 1 (freed now) or 0.
 * KEYS: m lock keys, m queue keys. ARGV: stay (ms), then per key its token and waiter id ('' for none).
 */
export const RELEASE_SCRIPT = script(
  'release',
  QUEUE_LUA +
    `local m = #KEYS / 2
local stay = tonumber(ARGV[1])
local freed = {}
for i = 1, m do
  local token, waiter = ARGV[2 * i], ARGV[2 * i + 1]
  if waiter ~= '' then redis.call('HDEL', KEYS[m + i], waiter) end
  freed[i] = 0
  if redis.call('GET', KEYS[i]) == token then
    handOn(KEYS[i], KEYS[m + i], stay)
    freed[i] = 1
  end
end
return freed`,
  {
    votes: false,
    // ARGV: stay, then per key token and waiter id.
    layout: blocks({ perResource: 2 }, (args, indexes) => [args[0]!, ...indexes.flatMap((i) => [args[1 + 2 * i]!, args[2 + 2 * i]!])]),
    merge: (calls, replies) => {
      const freed = new Array<number>(resourcesOf(calls)).fill(0);
      calls.forEach((call, c) => {
        const perKey = replies[c];
        if (!Array.isArray(perKey) || perKey.length !== call.indexes.length) throw new UnexpectedReplyError('release', perKey);
        call.indexes.forEach((index, k) => (freed[index] = perKey[k] as number));
      });
      return { reply: freed, undo: [] };
    },
  },
);

/**
 * RELEASE_SCRIPT for one key, the common case of a release alone in its tick. Same effect, but
 * a key with no queue is freed before the queue helpers are even defined, and the reply is a
 * plain integer: about a third less work per master than the general script.
 * Returns 1 (freed now) or 0.
 * KEYS: lock key, queue key. ARGV: token, then the waiter id for a lock that queued (none for a
 * plain SET NX's: every argument is written and parsed on both sides, on every release).
 */
export const RELEASE_ONE_SCRIPT = script(
  'release-one',
  `if ARGV[2] then redis.call('HDEL', KEYS[2], ARGV[2]) end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
do
` +
    QUEUE_LUA +
    `handOn(KEYS[1], KEYS[2], ${QUEUE_ENTRY_STAY_MS})
end
return 1`,
);

/** RELEASE_SCRIPT's arguments taking back `call`'s grant: our token on each of its keys, no waiter entry. */
function releaseArgs(call: SlotCall): (string | number)[] {
  const token = call.args[0]!;
  return [QUEUE_ENTRY_STAY_MS, ...Array.from({ length: call.indexes.length }, () => [token, ''] as const).flat()];
}

/** ACQUIRE_SCRIPT replies, as votes: {1, fence} or {0, wait}; a kind mismatch {2, i, marker} refuses (the caller reads it apart). */
export function interpretAcquire(reply: unknown): RoundReply {
  if (Array.isArray(reply) && reply.length === 3 && reply[0] === 2) return { granted: false };
  if (!Array.isArray(reply) || reply.length !== 2 || (reply[0] !== 0 && reply[0] !== 1) || !isInteger(reply[1])) {
    throw new UnexpectedReplyError('acquire', reply);
  }
  return { granted: reply[0] === 1, value: reply[1] };
}

/** Replies to a take: TAKEN, or how long the blocking key still lives (a PTTL). */
export function interpretTake(reply: unknown): RoundReply {
  if (reply === TAKEN) return { granted: true };
  if (!isInteger(reply) || reply < -2) throw new UnexpectedReplyError('take', reply);
  return { granted: false, value: reply };
}

/** RELEASE_SCRIPT's per-key replies for `count` keys: each 1 (freed) or 0. */
export function freedPerKey(reply: unknown, count: number): readonly number[] {
  if (!Array.isArray(reply) || reply.length !== count || !reply.every(isFreedReply)) {
    throw new UnexpectedReplyError('release', reply);
  }
  return reply as number[];
}

/** RELEASE_ONE_SCRIPT's reply: 1 (freed) or 0. */
export function freedOne(reply: unknown): number {
  if (!isFreedReply(reply)) throw new UnexpectedReplyError('release', reply);
  return reply;
}

function isFreedReply(reply: unknown): reply is 0 | 1 {
  return reply === 0 || reply === 1;
}

/** TAKE_SCRIPT's per-key replies for `count` keys: TAKEN or a PTTL each, read by interpretTake. */
export function takesPerKey(reply: unknown, count: number): readonly unknown[] {
  if (!Array.isArray(reply) || reply.length !== count) throw new UnexpectedReplyError('take', reply);
  return reply;
}
