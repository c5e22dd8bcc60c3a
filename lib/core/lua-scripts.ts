import { createHash } from 'node:crypto';
import type { RoundReply } from './quorum-round.js';

export interface LuaScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
}

function script(name: string, source: string): LuaScript {
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

/**
 * All or nothing on this node: every key is free (or already ours, when a retried request
 * lands twice) and no live waiter is queued ahead of us, or nothing is locked.
 *
 * Fair queue (one hash per resource, field = waiter id, value = "ticket deadline"): a caller
 * that cannot have the lock enlists with its ticket, which it chose once for all masters, so
 * every master orders waiters alike; a free lock goes only to the lowest live ticket. An entry
 * dies at its deadline unless its waiter comes back, so a crashed waiter blocks no one for long.
 *
 * Returns {1, fence} on grant: for a fenced lock the highest fence counter of the resources
 * here, read in the same script as the SET so no holder's write-back slips between; else 0.
 * Returns {0, wait} on refusal: how long until the blocking key expires or the head's entry
 * dies, whichever is later, so a waiter knows how long a crashed holder can stall it.
 * KEYS: n lock keys, n queue keys, then n fence keys when fenced.
 * ARGV: token, ttl ms, n, waiter id, ticket, how long an entry lives without its waiter (ms).
 */
export const ACQUIRE_SCRIPT = script(
  'acquire',
  `local n = tonumber(ARGV[3])
local me, ticket, stay = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local wait = -2
for i = 1, n do
  local owner = redis.call('GET', KEYS[i])
  if owner and owner ~= ARGV[1] then
    local pttl = redis.call('PTTL', KEYS[i])
    if pttl > wait then wait = pttl end
  end
end
local queued = false
local now
local queues = {}
for i = 1, n do
  local q = KEYS[n + i]
  queues[i] = redis.call('EXISTS', q) == 1
  if queues[i] then
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    local entries = redis.call('HGETALL', q)
    local head, headTicket, headDeadline
    for j = 1, #entries, 2 do
      local t, d = string.match(entries[j + 1], '(%S+) (%S+)')
      t, d = tonumber(t), tonumber(d)
      if d < now then
        redis.call('HDEL', q, entries[j])
      elseif entries[j] ~= me and (not head or t < headTicket or (t == headTicket and entries[j] < head)) then
        head, headTicket, headDeadline = entries[j], t, d
      end
    end
    if head and (headTicket < ticket or (headTicket == ticket and head < me)) then
      queued = true
      if headDeadline - now > wait then wait = headDeadline - now end
    end
  end
end
if wait ~= -2 or queued then
  if me ~= '' then
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    local deadline = now + math.max(wait, 0) + stay
    for i = 1, n do
      redis.call('HSET', KEYS[n + i], me, ARGV[5] .. ' ' .. deadline)
      redis.call('PEXPIRE', KEYS[n + i], math.max(wait, 0) + stay * 2)
    end
  end
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
);

/**
 * Second phase of a fenced acquisition: raises each resource's fence counter to the new fence,
 * but only while this node still holds every lock key with our token. A write-back landing
 * after our key expired could follow the next holder's read and break monotonicity.
 * KEYS: n lock keys, n queue keys, n fence keys. ARGV: token, fence, n. Returns 1 or 0.
 */
export const FENCE_SCRIPT = script(
  'fence',
  `local n = tonumber(ARGV[3])
for i = 1, n do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
local fence = tonumber(ARGV[2])
for i = 1, n do
  local counter = tonumber(redis.call('GET', KEYS[2 * n + i]) or '0')
  if not counter or counter < fence then redis.call('SET', KEYS[2 * n + i], ARGV[2]) end
end
return 1`,
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
);

/**
 * Compare-and-delete per key: never deletes a key another owner holds, so releasing a lock
 * that expired and was taken over is harmless. Idempotent, so it is safe to repeat when a
 * reply was lost. Also drops the holder's own queue entry (left on masters that refused it in
 * the winning round), then, when anyone queues for the lock, publishes on the lock key's name
 * the id of the first live waiter ('' when all entries died), so that waiter, and only it,
 * retries at once.
 * Returns how many keys were deleted.
 * KEYS: n lock keys, n queue keys. ARGV: token, the holder's waiter id ('' for none).
 */
export const RELEASE_SCRIPT = script(
  'release',
  `local n = #KEYS / 2
local deleted = 0
local now
for i = 1, n do
  local q = KEYS[n + i]
  if ARGV[2] ~= '' then redis.call('HDEL', q, ARGV[2]) end
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    deleted = deleted + 1
    -- Nobody sleeps on this lock unless it is queued here: no queue, no message.
    local head, headTicket = nil, nil
    if redis.call('EXISTS', q) == 1 then
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      end
      local entries = redis.call('HGETALL', q)
      for j = 1, #entries, 2 do
        local t, d = string.match(entries[j + 1], '(%S+) (%S+)')
        t, d = tonumber(t), tonumber(d)
        if d < now then
          redis.call('HDEL', q, entries[j])
        elseif not headTicket or t < headTicket or (t == headTicket and entries[j] < head) then
          head, headTicket = entries[j], t
        end
      end
      redis.call('PUBLISH', KEYS[i], head or '')
    end
  end
end
return deleted`,
);

/** ACQUIRE_SCRIPT replies, as votes. */
export function interpretAcquire(reply: unknown): RoundReply {
  const [status, value] = reply as [number, number];
  return { granted: status === 1, value: Number(value) };
}

/** EXTEND_SCRIPT and FENCE_SCRIPT replies. */
export function grantedIfOne(reply: unknown): RoundReply {
  return { granted: Number(reply) === 1 };
}

/** RELEASE_SCRIPT replies: keys deleted. */
export function grantedIfPositive(reply: unknown): RoundReply {
  return { granted: Number(reply) > 0 };
}
