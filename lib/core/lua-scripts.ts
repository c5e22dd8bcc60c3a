import { createHash } from 'node:crypto';

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
 * lands twice), or none is touched. Returns {1, fence} on grant, {0, pttl} on refusal with the
 * longest remaining ttl of a blocking key, so waiters know how long a crashed holder can block.
 * For a fenced lock, `fence` is the highest fence counter of the resources on this node, read in
 * the same script as the SET NX so no holder's write-back can slip between them; 0 otherwise.
 * KEYS: the n lock keys, then (fenced only) their n fence keys. ARGV: token, ttl ms, n.
 */
export const ACQUIRE_SCRIPT = script(
  'acquire',
  `local n = tonumber(ARGV[3])
local blocked = -2
for i = 1, n do
  local owner = redis.call('GET', KEYS[i])
  if owner and owner ~= ARGV[1] then
    local pttl = redis.call('PTTL', KEYS[i])
    if pttl > blocked then blocked = pttl end
  end
end
if blocked ~= -2 then return {0, blocked} end
local fence = 0
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  if #KEYS > n then
    local counter = tonumber(redis.call('GET', KEYS[n + i]) or '0')
    if counter and counter > fence then fence = counter end
  end
end
return {1, fence}`,
);

/**
 * Second phase of a fenced acquisition: raises each resource's fence counter to the new fence,
 * but only while this node still holds every lock key with our token. A write-back landing
 * after our key expired could follow the next holder's read and break monotonicity.
 * KEYS: the n lock keys, then their n fence keys. ARGV: token, fence, n. Returns 1 or 0.
 */
export const FENCE_SCRIPT = script(
  'fence',
  `local n = tonumber(ARGV[3])
for i = 1, n do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
local fence = tonumber(ARGV[2])
for i = 1, n do
  local counter = tonumber(redis.call('GET', KEYS[n + i]) or '0')
  if not counter or counter < fence then redis.call('SET', KEYS[n + i], ARGV[2]) end
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
 * reply was lost. Returns how many keys were deleted.
 * KEYS: the lock keys. ARGV[1]: token.
 */
export const RELEASE_SCRIPT = script(
  'release',
  `local deleted = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    deleted = deleted + 1
  end
end
return deleted`,
);
