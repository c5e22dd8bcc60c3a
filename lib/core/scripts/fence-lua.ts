/**
 * Lua: raises the fence counters KEYS[<first> + i], i = 1..n, to ARGV[2] where they are lower,
 * expiring ARGV[4] ms later (0: kept). Shared by the lock's and the shared holders' write-backs.
 */
export function raiseFencesLua(first: string): string {
  return `local fence = tonumber(ARGV[2])
local expire = tonumber(ARGV[4])
for i = 1, n do
  local counter = tonumber(redis.call('GET', KEYS[${first} + i]) or '0')
  if not counter or counter < fence then
    if expire > 0 then
      redis.call('SET', KEYS[${first} + i], ARGV[2], 'PX', expire)
    else
      redis.call('SET', KEYS[${first} + i], ARGV[2])
    end
  end
end`;
}
