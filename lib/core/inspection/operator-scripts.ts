import { script } from '../scripts/lua-script.js';
import { QUEUE_LUA } from '../waiting/queue-scripts.js';
import { QUEUE_ENTRY_STAY_MS } from '../waiting/queue-scripts.js';
import { errorText, type RedisNode } from '../voters/redis-node.js';
import type { EngineRounds } from '../rounds/engine-rounds.js';
import { nodeTimeoutMs, type ResolvedRedlockOptions } from '../lock/redlock-options.js';
import { within } from '../base/within.js';

/** What a forced release did: `redlock.forceRelease()`. */
export interface ForcedRelease {
  /** The resource. */
  readonly resource: string;
  /** Masters on which a hold (a lock, readers or permits) was removed. */
  readonly freedOn: number;
  /** Masters that answered. */
  readonly answered: number;
  /**
   * The fence counter, raised on every master that answered to at least this: the next fenced
   * holder gets a larger token, so a store that checks tokens refuses the old holder's writes
   * from that holder's first write on. Undefined when no master answered.
   */
  readonly fence: number | undefined;
  /** Each master: what it did, or why it could not. */
  readonly masters: readonly ForcedReleaseOnMaster[];
}

/** What a forced release did on one master. */
export interface ForcedReleaseOnMaster {
  /** The master, by host and port. */
  readonly node: string;
  /** A hold was removed there. */
  readonly freed?: boolean;
  /** Its fence counter after the release. */
  readonly fence?: number;
  /** Why it could not, free of credentials. */
  readonly error?: string;
}

/** The waiters of a resource's fair queue: `redlock.waiters()`. */
export interface QueueListing {
  /** First in line first. */
  readonly waiters: readonly QueuedWaiter[];
  /** How many masters answered. */
  readonly answered: number;
}

/** A waiter in a resource's fair queue, as `redlock.waiters()` lists it. */
export interface QueuedWaiter {
  /** The waiter's id: its process's id, then a sequence number (no secret). */
  readonly id: string;
  /** Its place: lower goes first (wall-clock based, chosen once per waiter). */
  readonly ticket: number;
  /** How many masters list it. */
  readonly masters: number;
  /** For how long, at most, a master keeps its entry unless it comes back, in ms. */
  readonly staysMs: number;
  /** What it waits as, when not an exclusive lock: `'read'`, or `'limit N'` for a permit. */
  readonly kind?: string;
}

// KEYS[1] lock key, KEYS[2] queue, KEYS[3] holders, KEYS[4] fence. ARGV[1] the queue's stay (ms),
// ARGV[2] the fence floor (wall clock in µs, 0 for none), ARGV[3] the fence counter's expiry
// (ms, 0: kept). Drops whatever holds the key, raises the fence counter past anything handed out
// (INCR keeps the arithmetic exact: a Lua number would print a 16-digit counter rounded), then
// hands the key on to the queue's head as a release does. Returns {1 if a hold was removed, fence}.
const FORCE_RELEASE = script(
  'force-release',
  QUEUE_LUA +
    `local held = 0
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[3]) == 1 then held = 1 end
local counter = tonumber(redis.call('GET', KEYS[4]) or '0')
if counter and counter >= tonumber(ARGV[2]) then
  redis.call('INCR', KEYS[4])
else
  redis.call('SET', KEYS[4], ARGV[2] == '0' and '1' or ARGV[2])
end
if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[4], ARGV[3]) end
redis.call('DEL', KEYS[3])
handOn(KEYS[1], KEYS[2], tonumber(ARGV[1]))
return {held, redis.call('GET', KEYS[4])}`,
);

// KEYS[1] queue. The live entries: {id, "ticket deadline tag", ...} and the master's clock.
const WAITERS = script(
  'waiters',
  `local t = redis.call('TIME')
return {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), redis.call('HGETALL', KEYS[1])}`,
);

/** How long an operator's request waits for each master, in ms: as a round for a lock of 10 s. */
const OPERATOR_TTL_MS = 10_000;

/** Runs `request` on every master (quarantined or not: an operator's call is no vote), each within the node timeout. */
async function everyMaster<T>(
  nodes: readonly RedisNode[],
  options: ResolvedRedlockOptions,
  request: (node: RedisNode) => Promise<T>,
): Promise<({ reply: T } | { error: string })[]> {
  const timeoutMs = nodeTimeoutMs(options, OPERATOR_TTL_MS);
  return Promise.all(
    nodes.map(async (node) => {
      try {
        const reply = await within(request(node), timeoutMs, () => {
          throw new Error(`no reply within ${timeoutMs} ms`);
        });
        return { reply };
      } catch (error) {
        return { error: errorText(error) };
      }
    }),
  );
}

/** Breaks `resource`'s lock on every master, whoever holds it, and raises its fence. */
export async function forceRelease(rounds: EngineRounds, resource: string): Promise<ForcedRelease> {
  const { names, options, nodes } = rounds;
  const keys = [names.lock(resource), names.queue(resource), names.holders(resource), names.fence(resource)];
  const floor = options.fenceTimeFloor ? String(Date.now() * 1000) : '0';
  const expire = options.fenceTimeFloor ? options.fenceRetentionMs + OPERATOR_TTL_MS : 0;
  const answers = await everyMaster(nodes, options, (node) => node.run(FORCE_RELEASE, keys, [QUEUE_ENTRY_STAY_MS, floor, expire]));
  const masters = answers.map((answer, index): ForcedReleaseOnMaster => {
    const node = nodes[index]!.name;
    if ('error' in answer) return { node, error: answer.error };
    const [held, fence] = answer.reply as [number, string];
    return { node, freed: held === 1, fence: Number(fence) };
  });
  const fences = masters.flatMap((master) => (master.fence === undefined ? [] : [master.fence]));
  return {
    resource,
    freedOn: masters.filter((master) => master.freed).length,
    answered: masters.filter((master) => master.error === undefined).length,
    fence: fences.length ? Math.max(...fences) : undefined,
    masters,
  };
}

/** The waiters in `resource`'s fair queue on any master, first in line first. */
export async function queuedWaiters(rounds: EngineRounds, resource: string): Promise<QueueListing> {
  const { names, options, nodes } = rounds;
  const answers = await everyMaster(nodes, options, (node) => node.run(WAITERS, [names.queue(resource)], []));
  const byId = new Map<string, { ticket: number; masters: number; staysMs: number; kind?: string }>();
  let answered = 0;
  for (const answer of answers) {
    if ('error' in answer) continue;
    answered++;
    const [now, flat] = answer.reply as [number, string[]];
    for (let i = 0; i < flat.length; i += 2) {
      const [ticket, deadline, tag] = flat[i + 1]!.split(' ');
      const staysMs = Number(deadline) - Number(now);
      if (!(staysMs >= 0)) continue;
      const seen = byId.get(flat[i]!) ?? { ticket: Number(ticket), masters: 0, staysMs: 0 };
      seen.masters++;
      seen.staysMs = Math.max(seen.staysMs, staysMs);
      const kind = tag === '*r' ? 'read' : tag?.startsWith('*s') ? `limit ${tag.slice(2)}` : undefined;
      if (kind) seen.kind = kind;
      byId.set(flat[i]!, seen);
    }
  }
  const waiters = [...byId].map(([id, seen]) => ({ id, ...seen })).sort((a, b) => a.ticket - b.ticket || (a.id < b.id ? -1 : 1));
  return { waiters, answered };
}
