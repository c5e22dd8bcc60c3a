import { createHash } from 'node:crypto';

/**
 * How long a waiter's queue entry outlives the wait the masters told it about, or lives once a
 * script has woken it (nameHead), if the waiter does not come back, and the longest a release
 * reserves a key for the queue's head: what a crashed waiter at the head can cost the others.
 */
export const QUEUE_ENTRY_STAY_MS = 1_000;

/** Followed by a process id: the channel on which the masters wake that process's queue heads. */
export const WAKE_CHANNEL_PREFIX = 'redlock-wake:';

export interface LuaScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
}

export function script(name: string, source: string): LuaScript {
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

/**
 * Lua shared by the scripts that read or hand on a resource's fair queue (one hash per
 * resource, field = waiter id, value = "ticket deadline" and a tag: a shared waiter's marker, or a
 * hand-off waiter's grant).
 * - nowMs(): the master's clock, read once per script call.
 * - liveHead(q, now, except): the live entry with the lowest ticket (ties by id), and the
 *   runner-up's id, dropping dead entries on the way; `except` (a waiter id) is skipped.
 * - nameHead(key, q, now, stay, head, deadline, entry, second): wakes the head, cuts its entry to `stay`
 *   unless its waiter comes back, and tells the runner-up to look again within `stay`.
 * - handOn(key, q, stay): the lock key has just been freed by its owner. If anyone lives in
 *   the queue, the key goes to the head. A head whose entry carries a grant (" =token ttl stamp
 *   anchor", written by enlist for a hand-off waiter) is granted the key at once: SET to its
 *   token with its ttl, its entry dropped, and its message says which of its requests wrote the
 *   entry (anchor); it also carries how long ago by this master's clock (now - stamp) and which
 *   server granted (its run_id), which engines before 0.2 relied on. A message proves nothing
 *   (anyone may PUBLISH): the waiter asks the master (CONFIRM_SCRIPT) and reckons its validity
 *   from that answer (docs/GUARANTEES.md, "Server-side hand-off"). Any other
 *   head gets a reservation ("~" + its id, which no token can equal) for as long as its entry
 *   lives, at most `stay` ms: nobody else can slip in, not even a caller trying a plain SET NX,
 *   while the head comes to take it with a full round of its own; its entry lapses with the
 *   reservation unless it comes, and the runner-up is told to look again by then (nameHead), so a
 *   crashed head costs the others about `stay`. Else the key is deleted, and
 *   a queue whose entries all died is told so ('' on the key's channel wakes anyone listening).
 *   The head is woken on its own process's channel (WAKE_CHANNEL_PREFIX + the part of its id
 *   before ':'), with "<id> <key>" (a reservation) or "<id>/<anchor>/<elapsed>/<run_id> <key>" (a
 *   grant; a key may hold spaces, an id never holds '/' or '+'), the runner-up with
 *   "<id>+<ms> <key>": only that process hears it. On the key's channel every process waiting for the
 *   key would be sent the message, one write per process and master for every release, to
 *   wake one waiter.
 */
export const QUEUE_LUA = `local clock
local function nowMs()
  if not clock then
    local t = redis.call('TIME')
    clock = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return clock
end
local function liveHead(q, now, except)
  local entries = redis.call('HGETALL', q)
  local head, headTicket, headDeadline, headEntry, second, secondTicket
  for j = 1, #entries, 2 do
    local t, d = string.match(entries[j + 1], '(%S+) (%S+)')
    t, d = tonumber(t), tonumber(d)
    if d < now then
      redis.call('HDEL', q, entries[j])
    elseif entries[j] ~= except then
      if not head or t < headTicket or (t == headTicket and entries[j] < head) then
        second, secondTicket = head, headTicket
        head, headTicket, headDeadline, headEntry = entries[j], t, d, entries[j + 1]
      elseif not second or t < secondTicket or (t == secondTicket and entries[j] < second) then
        second, secondTicket = entries[j], t
      end
    end
  end
  return head, headTicket, headDeadline, headEntry, second
end
-- Whether a live waiter stands ahead of (me, ticket) in a queue KEYS[n + i] not reserved for us,
-- and how long the longest-lived such head's entry lasts; and which of the queues exist.
local function aheadOf(n, reserved, me, ticket)
  local queued, headWait, queues = false, -2, {}
  for i = 1, n do
    local q = KEYS[n + i]
    queues[i] = redis.call('EXISTS', q) == 1
    -- A key reserved for us means a release found us at the head here: no one is ahead.
    if queues[i] and not reserved[i] then
      local now = nowMs()
      local head, headTicket, headDeadline = liveHead(q, now, me)
      if head and (headTicket < ticket or (headTicket == ticket and head < me)) then
        queued = true
        if headDeadline - now > headWait then headWait = headDeadline - now end
      end
    end
  end
  return queued, headWait, queues
end
-- A refused caller (me, with its ticket as sent) takes its place in the n queues KEYS[n + i] for
-- wait ms plus its stay; tag follows the deadline in the entry ('' for none). A hand-off
-- waiter's tag is its grant (see grantTag).
local function enlist(n, me, ticket, wait, stay, tag)
  if me == '' then return end
  local deadline = nowMs() + math.max(wait, 0) + stay
  for i = 1, n do
    redis.call('HSET', KEYS[n + i], me, ticket .. ' ' .. deadline .. tag)
    redis.call('PEXPIRE', KEYS[n + i], math.max(wait, 0) + stay * 2)
  end
end
-- What a hand-off waiter's entry carries after its deadline: the token and ttl a release grants
-- it, this master's clock when the entry was written, and which of its requests wrote it.
local function grantTag(token, ttl, anchor)
  return ' =' .. token .. ' ' .. ttl .. ' ' .. nowMs() .. ' ' .. anchor
end
local function wakeChannel(waiter)
  return '${WAKE_CHANNEL_PREFIX}' .. string.match(waiter, '^[^:]*')
end
-- A crashed head must not stand ahead of the others until the long deadline its last refusal
-- gave it: its entry lapses \`stay\` from now unless its waiter enlists again (same ticket, same
-- place). The runner-up, whom nobody else would name, is told to look again by then: a hint,
-- which costs it no round if the head comes and its release names the runner-up first.
local function nameHead(key, q, now, stay, head, deadline, entry, second)
  if deadline > now + stay then
    redis.call('HSET', q, head, (string.gsub(entry, '^(%S+) %S+', '%1 ' .. (now + stay), 1)))
  end
  redis.call('PUBLISH', wakeChannel(head), head .. ' ' .. key)
  if second then redis.call('PUBLISH', wakeChannel(second), second .. '+' .. stay .. ' ' .. key) end
end
local function handOn(key, q, stay)
  if redis.call('EXISTS', q) == 0 then
    redis.call('DEL', key)
    return
  end
  local now = nowMs()
  local head, _, deadline, entry, second = liveHead(q, now, nil)
  if not head then
    redis.call('DEL', key)
    redis.call('PUBLISH', key, '')
    return
  end
  local token, ttl, stamp, anchor = string.match(entry, ' =(%S+) (%d+) (%d+) (%d+)$')
  if token then
    redis.call('SET', key, token, 'PX', ttl)
    redis.call('HDEL', q, head)
    -- Which server granted: one server reached under two names, or a subscriber connection that
    -- reached another server than its master's, must not count twice.
    local server = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
    redis.call('PUBLISH', wakeChannel(head), head .. '/' .. anchor .. '/' .. (now - tonumber(stamp)) .. '/' .. server .. ' ' .. key)
  else
    local life = math.max(1, math.min(deadline - now, stay))
    redis.call('SET', key, '~' .. head, 'PX', life)
    nameHead(key, q, now, life, head, deadline, entry, second)
  end
end
`;

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
);
/** TAKE_SCRIPT's reply for a key it set. */
export const TAKEN = 'taken';

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
);

/**
 * RELEASE_SCRIPT for one key, the common case of a release alone in its tick. Same effect, but
 * a key with no queue is freed before the queue helpers are even defined, and the reply is a
 * plain integer: about a third less work per master than the general script.
 * Returns 1 (freed now) or 0.
 * KEYS: lock key, queue key. ARGV: token, waiter id ('' for none), stay (ms).
 */
export const RELEASE_ONE_SCRIPT = script(
  'release-one',
  `if ARGV[2] ~= '' then redis.call('HDEL', KEYS[2], ARGV[2]) end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
do
` +
    QUEUE_LUA +
    `handOn(KEYS[1], KEYS[2], tonumber(ARGV[3]))
end
return 1`,
);

/**
 * A waiter giving up, or done: drops its queue entries, and a key reserved for it goes on to the
 * next head (or is freed), so the others need not wait for the reservation to lapse. So does a
 * key holding one of a hand-off waiter's tokens (ARGV[3], its prefix), other than the one it
 * keeps (ARGV[4]: the lock it holds now, '' for none): a grant it will not use.
 * KEYS: n lock keys, n queue keys. ARGV: stay (ms), waiter id, token prefix ('' for none), token kept.
 */
export const LEAVE_SCRIPT = script(
  'leave',
  QUEUE_LUA +
    `local n = #KEYS / 2
local prefix, keep = ARGV[3] or '', ARGV[4] or ''
for i = 1, n do
  redis.call('HDEL', KEYS[n + i], ARGV[2])
  local owner = redis.call('GET', KEYS[i])
  if owner and (owner == '~' .. ARGV[2] or (prefix ~= '' and owner ~= keep and string.sub(owner, 1, #prefix) == prefix)) then
    handOn(KEYS[i], KEYS[n + i], tonumber(ARGV[1]))
  end
end
return 1`,
);

/**
 * A hand-off waiter asks a master that said (by message) it granted the key: does the key hold
 * this token, and for how long more? The message is only a hint, since anyone who can read the
 * queue and run PUBLISH can forge one; this reply, to the waiter's own request, is the grant.
 * Returns the key's PTTL when it holds ARGV[1], else -3.
 * KEYS: the lock key. ARGV: the token.
 */
export const CONFIRM_SCRIPT = script(
  'confirm',
  `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PTTL', KEYS[1]) end
return -3`,
);
