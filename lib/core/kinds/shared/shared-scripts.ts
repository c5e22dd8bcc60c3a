import { blocks, perResource, script } from '../../scripts/lua-script.js';
import { raiseFencesLua } from '../../scripts/fence-lua.js';
import { mergeAcquire, mergeAllOnes, UnexpectedReplyError, type RoundReply } from '../../scripts/replies.js';
import { QUEUE_ENTRY_STAY_MS, QUEUE_LUA } from '../../waiting/queue-scripts.js';

/**
 * Lua for readers and permit holders ("shared holders"; see docs/GUARANTEES.md, "Semaphores and
 * read-write locks"). Per resource and master: the lock key holds a marker (`*r` for readers,
 * `*s<limit>` for permits) for as long as any holder there lives, so every writer's SET NX
 * fails meanwhile; the holders hash (field = token, value = "deadline slots", the deadline on
 * the master's clock, the slots a comma-separated ascending list: one for a permit, several for
 * a weighted permit, `r` for a reader) says who they are. An entry past its deadline is dead,
 * exactly as a key past its PX would be. The marker expires at the latest deadline written in the
 * holders (SET PXAT, on the same clock reading as the entry), so a release can tell from the
 * marker alone whether a later holder keeps it.
 *
 * - live(h, now): drops dead entries; the slots in use, how many, and the earliest and latest
 *   live deadlines.
 * - wakeHead(key, q, now, marker, stay): wakes the queue's head if it waits for this same kind,
 *   because a grant left room or a permit was released (nameHead: its entry then lives at most
 *   `stay` more unless it comes, and the runner-up is told to look again by then).
 */
const SHARED_LUA =
  QUEUE_LUA +
  `local function live(h, now, except)
  local entries = redis.call('HGETALL', h)
  local used, count, earliest, latest, mine = {}, 0, nil, 0, nil
  for j = 1, #entries, 2 do
    local d, s = string.match(entries[j + 1], '(%S+) (%S+)')
    d = tonumber(d)
    if d <= now then
      redis.call('HDEL', h, entries[j])
    elseif entries[j] == except then
      mine = s
    else
      if string.find(s, ',', 1, true) then
        for slot in string.gmatch(s, '[^,]+') do
          used[slot] = true
          count = count + 1
        end
      else
        -- One slot (a reader's r, a permit of weight 1): no iterator to make.
        used[s] = true
        count = count + 1
      end
      if not earliest or d < earliest then earliest = d end
      if d > latest then latest = d end
    end
  end
  return used, count, earliest, latest, mine
end
local function wakeHead(key, q, now, marker, stay)
  local head, _, deadline, entry, second = liveHead(q, now, nil)
  if not head then return end
  if string.match(entry, '^%S+ %S+ (%S+)') == marker then nameHead(key, q, now, stay, head, deadline, entry, second) end
end
`;

/** The acquire of one reader or permit (SHARED_ACQUIRE_SCRIPT), as a function of its KEYS and ARGV, so that a batch can run several. */
const ACQUIRE_ONE_LUA = `local function acquireOne(KEYS, ARGV)
local token, ttl, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local me, ticket, stay = ARGV[4], tonumber(ARGV[5]), ${QUEUE_ENTRY_STAY_MS}
local marker, limit, permits = ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
local reservation = me ~= '' and ('~' .. me) or nil
local now = nowMs()
local wait = -2
local reserved = {}
for i = 1, n do
  local owner = redis.call('GET', KEYS[i])
  if owner then
    local first = string.sub(owner, 1, 1)
    if owner == reservation then
      reserved[i] = true
    elseif first == '*' and owner ~= marker then
      return {2, i, owner}
    elseif limit > 0 and first ~= '*' and first ~= '~' then
      return {2, i, 'lock'}
    elseif owner ~= marker then
      local pttl = redis.call('PTTL', KEYS[i])
      if pttl > wait then wait = pttl end
    end
  end
end
local slots, counts, frees = {}, {}, {}
local full = false
for i = 1, n do
  -- Readers are neither counted nor given slots, and a dead entry is dead wherever it is read:
  -- the holders need no scan here (a release's scan drops the dead ones).
  local used, count, earliest, _, mine
  if limit > 0 then used, count, earliest, _, mine = live(KEYS[2 * n + i], now, token) end
  counts[i] = count
  if limit == 0 then
    slots[i] = 'r'
  elseif mine then
    slots[i] = mine
  else
    local chosen, taken, free = {}, {}, {}
    for slot in string.gmatch(ARGV[8 + i], '[^,]+') do
      local k = tonumber(slot)
      if #chosen < permits and k and tostring(k) == slot and k >= 0 and k < limit and not used[slot] and not taken[slot] then
        chosen[#chosen + 1] = k
        taken[slot] = true
      end
    end
    for k = 0, limit - 1 do
      local slot = tostring(k)
      if not used[slot] then
        free[#free + 1] = slot
        if #chosen < permits and not taken[slot] then
          chosen[#chosen + 1] = k
          taken[slot] = true
        end
      end
    end
    frees[i] = table.concat(free, ',')
    if #chosen < permits then
      full = true
      if earliest - now > wait then wait = earliest - now end
    else
      table.sort(chosen)
      slots[i] = table.concat(chosen, ',')
    end
  end
end
local queued, headWait, queues = aheadOf(n, reserved, me, ticket, limit == 0 and marker or nil, KEYS)
if wait ~= -2 or full or queued then
  if wait == -2 then wait = headWait end
  enlist(n, me, ARGV[5], wait, stay, ' ' .. marker, KEYS)
  return {0, wait}
end
local reply = {1, 0}
local fence = 0
for i = 1, n do
  local h = KEYS[2 * n + i]
  redis.call('HSET', h, token, (now + ttl) .. ' ' .. slots[i])
  if redis.call('PTTL', h) < ttl then redis.call('PEXPIRE', h, ttl) end
  if reserved[i] or redis.call('PTTL', KEYS[i]) < ttl then redis.call('SET', KEYS[i], marker, 'PXAT', now + ttl) end
  if queues[i] and me ~= '' then redis.call('HDEL', KEYS[n + i], me) end
  if #KEYS > 3 * n then
    local counter = tonumber(redis.call('GET', KEYS[3 * n + i]) or '0')
    if counter and counter > fence then fence = counter end
  end
  reply[2 + i] = slots[i]
  reply[2 + n + i] = frees[i] or ''
end
reply[2] = fence
for i = 1, n do
  if queues[i] and limit == 0 then
    wakeReaders(KEYS[i], KEYS[n + i], now, stay, false)
  elseif queues[i] and counts[i] + permits < limit then
    wakeHead(KEYS[i], KEYS[n + i], now, marker, stay)
  end
end
return reply
end
`;

/**
 * A reader or a permit, all or nothing on this node. Granted when, for every resource, the lock
 * key is free, holds this kind's marker, or is reserved for us; a permit also needs `permits`
 * free slots (the preferred ones that are free, then the first free in 0..limit-1: one order for
 * every client, so that masters tend to agree);
 * and no live waiter with a lower ticket is queued (a waiting writer stops later readers; a
 * reader waits for no reader, since both would share).
 * A lock key holding another kind's marker, or a writer's token when we want a permit, is a
 * mismatch of kinds: reported, never waited for. Refused callers enlist in the fair queue as
 * the acquire script does, their entry tagged with the marker so a grant that leaves room
 * wakes only a waiter of the same kind.
 * KEYS: n lock keys, n queue keys, n holders keys, then n fence keys when fenced.
 * ARGV: token, ttl ms, n, waiter id, ticket, marker, limit (0 for a reader), permits (how many
 * slots: 1 but for a weighted permit), then per resource the preferred slots ("1,3"; '' for
 * none). A queue entry's stay (QUEUE_ENTRY_STAY_MS) is written into the script: an argument
 * costs the client and the master on every call.
 * Returns {1, fence, slots per resource ("1,3"), free slots per resource ("0,1,3")}, {0, wait} or
 * {2, resource index, what holds it}. The free slots let a client whose masters disagreed on
 * the slots pick those free on most of them.
 */
export const SHARED_ACQUIRE_SCRIPT = script(
  'shared-acquire',
  SHARED_LUA +
    ACQUIRE_ONE_LUA +
    `return acquireOne(KEYS, ARGV)`,
  {
    votes: true,
    // ARGV: token, ttl, n, waiter id, ticket, marker, limit, permits, then per resource the preferred slots.
    layout: blocks({ argv: 2 }, perResource(8, 2)),
    merge: (calls, replies) => mergeAcquire('shared-acquire', calls, replies, true),
    // Our entry dropped from the holders, whatever its slots; lock, queue and holders keys, not the fence counters.
    undo: (call) => ({
      script: SHARED_RELEASE_SCRIPT,
      keys: call.keys.slice(0, 3 * call.indexes.length),
      args: [call.args[0]!, '', call.args[5]!, call.args[6]!, ...call.indexes.map(() => '')],
    }),
  },
);

/**
 * Several SHARED_ACQUIRE_SCRIPT requests in one call, run one after the other as that script
 * would run them sent one by one (SHARED_ACQUIRES: the requests of one tick on one connection).
 * KEYS: each request's keys in turn. ARGV: the count c, then per request its key and argument
 * counts, then each request's arguments in turn. Returns each request's reply, in order.
 */
export const SHARED_ACQUIRES_SCRIPT = script(
  'shared-acquires',
  SHARED_LUA +
    ACQUIRE_ONE_LUA +
    `local c = tonumber(ARGV[1])
local replies = {}
local key, arg = 0, 2 * c + 1
for r = 1, c do
  local nk, na = tonumber(ARGV[2 * r]), tonumber(ARGV[2 * r + 1])
  local keys, args = {}, {}
  for i = 1, nk do keys[i] = KEYS[key + i] end
  for i = 1, na do args[i] = ARGV[arg + i] end
  key, arg = key + nk, arg + na
  replies[r] = acquireOne(keys, args)
end
return replies`,
);

/**
 * Extends a reader or a permit only if, on every resource, our entry is live with the slots we
 * hold by a majority and the key holds our kind's marker. An entry of other slots (a master
 * that granted us different ones in the winning round) is dropped: it only costs room.
 * KEYS: n lock keys, n holders keys. ARGV: token, ttl ms, marker, slots per resource ("1,3"). Returns 1 or 0.
 */
export const SHARED_EXTEND_SCRIPT = script(
  'shared-extend',
  `local n = #KEYS / 2
local token, ttl, marker = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, n do
  local mine = redis.call('HGET', KEYS[n + i], token)
  if not mine or redis.call('GET', KEYS[i]) ~= marker then return 0 end
  local d, s = string.match(mine, '(%S+) (%S+)')
  if tonumber(d) <= now then return 0 end
  if s ~= ARGV[3 + i] then
    redis.call('HDEL', KEYS[n + i], token)
    return 0
  end
end
for i = 1, n do
  redis.call('HSET', KEYS[n + i], token, (now + ttl) .. ' ' .. ARGV[3 + i])
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('SET', KEYS[i], marker, 'PXAT', now + ttl) end
  if redis.call('PTTL', KEYS[n + i]) < ttl then redis.call('PEXPIRE', KEYS[n + i], ttl) end
end
return 1`,
  // KEYS: lock keys, holders keys. ARGV: token, ttl, marker, then per resource the slots.
  { votes: true, layout: blocks({ perResource: 2 }, perResource(3)), merge: mergeAllOnes },
);

/**
 * FENCE_SCRIPT for a reader or a permit: raises the fence counters only while our entries (with
 * our slots) are live here, for the same reason as for a lock.
 * KEYS: n lock keys, n queue keys, n holders keys, n fence keys.
 * ARGV: token, fence, n, expire ms (0: never), marker, slots per resource. Returns 1 or 0.
 */
export const SHARED_FENCE_SCRIPT = script(
  'shared-fence',
  `local n = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, n do
  local mine = redis.call('HGET', KEYS[2 * n + i], ARGV[1])
  if not mine or redis.call('GET', KEYS[i]) ~= ARGV[5] then return 0 end
  local d, s = string.match(mine, '(%S+) (%S+)')
  if tonumber(d) <= now or s ~= ARGV[5 + i] then return 0 end
end
${raiseFencesLua('3 * n')}
return 1`,
  // ARGV: token, fence, n, expire, marker, then per resource the slots.
  { votes: true, layout: blocks({ argv: 2 }, perResource(5, 2)), merge: mergeAllOnes },
);

/**
 * Drops our entry (whatever its slots) and our queue entry. With holders left, a freed permit
 * wakes the queue's head, and the marker, which lives as long as the latest deadline set in it,
 * is cut to the latest live holder's when that deadline was ours; with none left, the key goes
 * to the queue's head or is freed (handOn), as a lock's release does. Idempotent.
 * When the marker outlives our deadline, a holder with a later deadline is live (the marker
 * expires at it), so nothing is freed and nothing need be cut: the holders are not read. Reading
 * them costs the master a parse per holder, and a hot key's releases mostly find a later holder.
 * The latest holder's release reads them and cuts the marker to the latest left, so the marker's
 * deadline is a holder's, and the last holder's release finds the hash gone or reads it. Three
 * things leave the marker later than every holder: a release that gave the key to the readers for
 * `stay` ms (handOn), an extension to a shorter ttl, and a permit's extension that dropped its
 * entry (its slots were not the majority's). A release that skips then leaves the marker to lapse
 * at that time (within `stay`, or the ttl the holder had before): what a holder that dies costs.
 * KEYS: n lock keys, n queue keys, n holders keys.
 * ARGV: token, waiter id ('' for none), marker, limit, slots per resource.
 * Returns how many resources were still held with our slots.
 */
export const SHARED_RELEASE_SCRIPT = script(
  'shared-release',
  SHARED_LUA +
    `local n = #KEYS / 3
local token, waiter, marker, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local stay = ${QUEUE_ENTRY_STAY_MS}
local freed = 0
for i = 1, n do
  local key, q, h = KEYS[i], KEYS[n + i], KEYS[2 * n + i]
  if waiter ~= '' then redis.call('HDEL', q, waiter) end
  local mine = redis.call('HGET', h, token)
  if mine then
    local now = nowMs()
    redis.call('HDEL', h, token)
    local d, s = string.match(mine, '(%S+) (%S+)')
    d = tonumber(d)
    if d > now and s == ARGV[4 + i] then freed = freed + 1 end
    if redis.call('GET', key) == marker then
      -- A millisecond's margin: PTTL and our clock are read apart, and a tie must read the holders.
      if redis.call('EXISTS', h) == 1 and now + redis.call('PTTL', key) > d + 1 then
        if limit > 0 then wakeHead(key, q, now, marker, stay) end
      else
        local _, count, _, latest = live(h, now, nil)
        if count > 0 then
          redis.call('SET', key, marker, 'PXAT', latest)
          redis.call('PEXPIRE', h, latest - now)
          if limit > 0 then wakeHead(key, q, now, marker, stay) end
        else
          handOn(key, q, stay)
        end
      end
    end
  end
end
return freed`,
  {
    votes: false,
    // KEYS: lock, queue and holders keys. ARGV: token, waiter id, marker, limit, then per resource the slots.
    layout: blocks({ perResource: 3 }, perResource(4)),
    // How many resources were still held with our slots: summed over the hash slots.
    merge: (_calls, replies) => {
      const bad = replies.find((reply) => !Number.isSafeInteger(reply));
      if (bad !== undefined) throw new UnexpectedReplyError('shared-release', bad);
      return { reply: (replies as number[]).reduce((sum, freed) => sum + freed, 0), undo: [] };
    },
  },
);

/** A SHARED_ACQUIRE_SCRIPT reply read for what the round needs: a grant with its slots, a refusal, or a mismatch. */
export type SharedReply =
  | { readonly kind: 'granted'; readonly fence: number; readonly slots: readonly string[]; readonly free: readonly string[] }
  | { readonly kind: 'refused'; readonly wait: number }
  | { readonly kind: 'mismatch'; readonly resourceIndex: number; readonly found: string };

export function readSharedReply(reply: unknown, resources: number): SharedReply {
  if (Array.isArray(reply) && Number.isSafeInteger(reply[1])) {
    if (reply[0] === 1 && reply.length === 2 + 2 * resources && reply.slice(2).every((slot) => typeof slot === 'string')) {
      return { kind: 'granted', fence: reply[1] as number, slots: reply.slice(2, 2 + resources) as string[], free: reply.slice(2 + resources) as string[] };
    }
    if (reply[0] === 0 && reply.length === 2) return { kind: 'refused', wait: reply[1] as number };
    if (reply[0] === 2 && reply.length === 3 && typeof reply[2] === 'string' && reply[1] >= 1 && reply[1] <= resources) {
      return { kind: 'mismatch', resourceIndex: (reply[1] as number) - 1, found: reply[2] };
    }
  }
  throw new UnexpectedReplyError('shared-acquire', reply);
}

/** SHARED_ACQUIRE_SCRIPT replies as votes: a mismatch is a refusal here, and the caller is told of it apart. */
export function sharedVote(resources: number): (reply: unknown) => RoundReply {
  return (reply) => {
    const read = readSharedReply(reply, resources);
    if (read.kind === 'granted') return { granted: true, value: read.fence };
    return { granted: false, value: read.kind === 'refused' ? read.wait : undefined };
  };
}
