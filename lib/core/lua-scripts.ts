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
 * lands twice), or none is touched. Returns {1, 0} on grant, {0, pttl} on refusal with the
 * longest remaining ttl of a blocking key, so waiters know how long a crashed holder can block.
 * KEYS: the lock keys. ARGV[1]: token, ARGV[2]: ttl in ms.
 */
export const ACQUIRE_SCRIPT = script(
  'acquire',
  `local blocked = -2
for i = 1, #KEYS do
  local owner = redis.call('GET', KEYS[i])
  if owner and owner ~= ARGV[1] then
    local pttl = redis.call('PTTL', KEYS[i])
    if pttl > blocked then blocked = pttl end
  end
end
if blocked ~= -2 then return {0, blocked} end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return {1, 0}`,
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
