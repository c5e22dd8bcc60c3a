import { READ } from '../lock/lock-kind.js';
import { WAKE_CHANNEL_PREFIX } from '../lock/redlock-options.js';
import { blocks, sameArgs, script } from '../scripts/lua-script.js';
import { isInteger, UnexpectedReplyError } from '../scripts/replies.js';

/**
 * How long a waiter's queue entry outlives the wait the masters told it about, or lives once a
 * script has woken it (nameHead), if the waiter does not come back, and the longest a release
 * reserves a key for the queue's head: what a crashed waiter at the head can cost the others.
 */
export const QUEUE_ENTRY_STAY_MS = 1_000;

/**
 * Lua shared by the scripts that read or hand on a resource's fair queue (one hash per
 * resource, field = waiter id, value = "ticket deadline" and a tag: a shared waiter's marker, or a
 * hand-off waiter's grant).
 * - nowMs(): the master's clock, read once per script call.
 * - liveHead(q, now, except, sharer): the live entry with the lowest ticket (ties by id), and the
 *   runner-up's id, dropping dead entries on the way; `except` (a waiter id) is skipped, and so
 *   are entries tagged `sharer` (a reader's marker: readers never wait for readers).
 * - nameHead(key, q, now, stay, head, deadline, entry, second): wakes the head, cuts its entry to `stay`
 *   unless its waiter comes back, and tells the runner-up to look again within `stay`.
 * - handOn(key, q, stay): the lock key has just been freed by its owner. If anyone lives in
 *   the queue, the key goes to the head. A head whose entry carries a grant (" =token ttl stamp
 *   anchor", written by enlist for a hand-off waiter) is granted the key at once: SET to its
 *   token with its ttl, its entry dropped, and its message says which of its requests wrote the
 *   entry (anchor); it also carries how long ago by this master's clock (now - stamp) and which
 *   server granted (its run_id), which engines before 0.2 relied on. A message proves nothing
 *   (anyone may PUBLISH): the waiter asks the master (CONFIRM_SCRIPT) and reckons its validity
 *   from that answer (docs/GUARANTEES.md, "Server-side hand-off"). A reader at the
 *   head: the key takes the readers' marker for `stay` ms and every reader ahead of the next
 *   writer is woken (wakeReaders). Any other head gets a reservation ("~" + its id, which no
 *   token can equal) for as long as its entry lives, at most `stay` ms: nobody else can slip
 *   in, not even a caller trying a plain SET NX, while the head comes to take it with a full round of its own; its entry lapses with the
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
local function liveHead(q, now, except, sharer)
  local entries = redis.call('HGETALL', q)
  local head, headTicket, headDeadline, headEntry, second, secondTicket
  for j = 1, #entries, 2 do
    local t, d, tag = string.match(entries[j + 1], '^(%S+) (%S+) ?(%S*)')
    t, d = tonumber(t), tonumber(d)
    if d < now then
      redis.call('HDEL', q, entries[j])
    elseif entries[j] ~= except and (not sharer or tag ~= sharer) then
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
-- Whether a live waiter stands ahead of (me, ticket) in a queue keys[n + i] not reserved for us
-- (one tagged \`sharer\` does not count, see liveHead), and how long the longest-lived such
-- head's entry lasts; and which of the queues exist. keys: the request's keys (KEYS by default).
local function aheadOf(n, reserved, me, ticket, sharer, keys)
  keys = keys or KEYS
  local queued, headWait, queues = false, -2, {}
  for i = 1, n do
    local q = keys[n + i]
    queues[i] = redis.call('EXISTS', q) == 1
    -- A key reserved for us means a release found us at the head here: no one is ahead.
    if queues[i] and not reserved[i] then
      local now = nowMs()
      local head, headTicket, headDeadline = liveHead(q, now, me, sharer)
      if head and (headTicket < ticket or (headTicket == ticket and head < me)) then
        queued = true
        if headDeadline - now > headWait then headWait = headDeadline - now end
      end
    end
  end
  return queued, headWait, queues
end
-- A refused caller (me, with its ticket as sent) takes its place in the n queues keys[n + i] for
-- wait ms plus its stay; tag follows the deadline in the entry ('' for none). A hand-off
-- waiter's tag is its grant (see grantTag). keys: the request's keys (KEYS by default).
local function enlist(n, me, ticket, wait, stay, tag, keys)
  if me == '' then return end
  keys = keys or KEYS
  local deadline = nowMs() + math.max(wait, 0) + stay
  for i = 1, n do
    redis.call('HSET', keys[n + i], me, ticket .. ' ' .. deadline .. tag)
    redis.call('PEXPIRE', keys[n + i], math.max(wait, 0) + stay * 2)
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
local function cutToStay(q, id, entry, deadline, now, stay)
  if deadline > now + stay then
    redis.call('HSET', q, id, (string.gsub(entry, '^(%S+) %S+', '%1 ' .. (now + stay), 1)))
  end
end
local function nameHead(key, q, now, stay, head, deadline, entry, second)
  cutToStay(q, head, entry, deadline, now, stay)
  redis.call('PUBLISH', wakeChannel(head), head .. ' ' .. key)
  if second then redis.call('PUBLISH', wakeChannel(second), second .. '+' .. stay .. ' ' .. key) end
end
-- Readers share, and never wait for readers (aheadOf's sharer): once one may come, every reader
-- queued ahead of the first waiter of another kind may come, and is woken at once (its entry cut
-- to \`stay\`, as nameHead does for one head), instead of one reader per grant in a chain of round
-- trips. After a reader's grant only readers not woken yet are (an entry that lives longer than
-- \`stay\`): woken ones are on their way. From handOn (\`freed\`), every one of them, and the first
-- waiter of another kind is told to look again by \`stay\`, when the readers' marker lapses if
-- none came.
local function wakeReaders(key, q, now, stay, freed)
  local entries = redis.call('HGETALL', q)
  local readers, other, otherId = {}, nil, nil
  for j = 1, #entries, 2 do
    local t, d, tag = string.match(entries[j + 1], '^(%S+) (%S+) ?(%S*)')
    t, d = tonumber(t), tonumber(d)
    if d >= now then
      if tag == '${READ.marker}' then
        readers[#readers + 1] = { entries[j], entries[j + 1], t, d }
      elseif not other or t < other or (t == other and entries[j] < otherId) then
        other, otherId = t, entries[j]
      end
    end
  end
  for _, reader in ipairs(readers) do
    local id, entry, t, d = reader[1], reader[2], reader[3], reader[4]
    if (freed or d > now + stay) and (not other or t < other or (t == other and id < otherId)) then
      cutToStay(q, id, entry, d, now, stay)
      redis.call('PUBLISH', wakeChannel(id), id .. ' ' .. key)
    end
  end
  if freed and otherId then redis.call('PUBLISH', wakeChannel(otherId), otherId .. '+' .. stay .. ' ' .. key) end
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
  elseif string.match(entry, '^%S+ %S+ (%S+)') == '${READ.marker}' then
    -- A reader heads the queue: the key goes to the readers (their marker, which no writer's
    -- SET NX passes), not to that one reader, so all queued before the next writer come at once.
    redis.call('SET', key, '${READ.marker}', 'PX', stay)
    wakeReaders(key, q, now, stay, true)
  else
    local life = math.max(1, math.min(deadline - now, stay))
    redis.call('SET', key, '~' .. head, 'PX', life)
    nameHead(key, q, now, life, head, deadline, entry, second)
  end
end
`;

/**
 * A waiter giving up, or done: drops its queue entries, and a key reserved for it goes on to the
 * next head (or is freed), so the others need not wait for the reservation to lapse. So does a
 * key holding one of a hand-off waiter's tokens (ARGV[3], its prefix), other than the one it
 * keeps (ARGV[4]: the lock it holds now, '' for none): a grant it will not use. So does a key a
 * release gave to the readers (handOn) once no reader holds there and none heads the queue: the
 * leaving reader was the last one it was kept for (one that holds the lock through the other
 * masters, its entry here left from a refusal), and nobody would come for it until it lapsed,
 * `stay` later, every writer refused here meanwhile.
 * KEYS: n lock keys, n queue keys, n holders keys. ARGV: stay (ms), waiter id, token prefix ('' for
 * none), token kept.
 */
export const LEAVE_SCRIPT = script(
  'leave',
  QUEUE_LUA +
    `local function readersDone(h, q)
  local now = nowMs()
  local holders = redis.call('HGETALL', h)
  for j = 2, #holders, 2 do
    if tonumber(string.match(holders[j], '^%S+')) > now then return false end
  end
  local head, _, _, entry = liveHead(q, now, nil)
  return not head or string.match(entry, '^%S+ %S+ (%S+)') ~= '${READ.marker}'
end
local n = #KEYS / 3
local prefix, keep = ARGV[3] or '', ARGV[4] or ''
for i = 1, n do
  redis.call('HDEL', KEYS[n + i], ARGV[2])
  local owner = redis.call('GET', KEYS[i])
  if owner and (owner == '~' .. ARGV[2] or (prefix ~= '' and owner ~= keep and string.sub(owner, 1, #prefix) == prefix)
      or (owner == '${READ.marker}' and readersDone(KEYS[2 * n + i], KEYS[n + i]))) then
    handOn(KEYS[i], KEYS[n + i], tonumber(ARGV[1]))
  end
end
return 1`,
  // ARGV: stay, waiter id.
  { votes: false, layout: blocks({ perResource: 3 }, sameArgs), merge: () => ({ reply: 1, undo: [] }) },
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

/** CONFIRM_SCRIPT replies: how long the key still lives with our token, or undefined when it does not hold it. */
export function confirmedPttl(reply: unknown): number | undefined {
  if (!isInteger(reply)) throw new UnexpectedReplyError('confirm', reply);
  return reply > 0 ? reply : undefined;
}
