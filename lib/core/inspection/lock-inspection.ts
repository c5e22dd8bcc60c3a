import { createHash } from 'node:crypto';
import { READ } from '../lock/lock-kind.js';
import type { EngineRounds } from '../rounds/engine-rounds.js';
import { readEveryMaster } from '../rounds/read-round.js';
import { script } from '../scripts/lua-script.js';

/** What one master says of a resource, in `LockInspection.masters`. Never a token. */
export interface MasterInspection {
  /** The master, by host and port. */
  readonly node: string;
  /** `'held'`, `'free'`, `'reserved'` (kept for the first waiter in line by a release), or `'unknown'` (no answer, or in restart quarantine). */
  readonly state: 'held' | 'free' | 'reserved' | 'unknown';
  /** What holds it there. */
  readonly kind?: InspectedKind;
  /** For permits: the semaphore's limit. */
  readonly limit?: number;
  /** Readers or permit holders alive there. */
  readonly holders?: number;
  /** For permits: how many of the `limit` its holders take there (a weighted permit takes several). */
  readonly used?: number;
  /**
   * For an exclusive lock: the first 12 hex digits of the SHA-1 of its token, the same on every
   * master that holds the same lock (the token itself would let anyone release it).
   */
  readonly holder?: string;
  /** How long the key lives there, in ms (for shared holds, until the last holder's deadline); absent for a key without expiry. */
  readonly remainingMs?: number;
  /** Live entries in its fair queue. */
  readonly waiting?: number;
  /** Its fence counter, if any. */
  readonly fence?: number;
  /** Why it could not say, free of credentials. */
  readonly error?: string;
}

/** When a held resource frees, unless its holders extend it: `LockInspection.freesInMs`. */
export interface FreesIn {
  /** In how many ms fewer than a majority of masters hold it: it can be taken then. */
  readonly earliestMs: number;
  /** In how many ms no master holds it. */
  readonly latestMs: number;
}

/** What holds a resource: an exclusive lock, readers, or permits of a semaphore. */
export type InspectedKind = 'exclusive' | 'read' | 'permits';

/**
 * A snapshot of one resource across the masters, written by nobody: `redlock.inspect()`.
 *
 * `'held'` or `'free'` only when a majority of masters says so; `'unknown'` when too few answer or
 * they disagree (a lock being taken, released or lost as they were read). A snapshot: the lock
 * may be taken or freed the moment after. Never a reason to skip taking the lock: only a grant
 * of it excludes others.
 */
export interface LockInspection {
  /** The resource. */
  readonly resource: string;
  /** `'held'` or `'free'` as a majority of masters says; `'unknown'` when too few answer or they disagree. */
  readonly state: 'held' | 'free' | 'unknown';
  /** What most of the masters that hold it say holds it. */
  readonly kind?: InspectedKind;
  /** For permits: the limit. */
  readonly limit?: number;
  /** Readers or permit holders, at most, on a master that holds it. */
  readonly holders?: number;
  /** For permits: how many of the `limit` are taken, at most, on a master that holds it (weighted permits count their weight). */
  readonly used?: number;
  /** For an exclusive lock held by the same lock on a majority: its holder's fingerprint (see MasterInspection.holder). */
  readonly holder?: string;
  /**
   * When held: in how many ms, unless extended, fewer than a majority hold it (`earliestMs`: then
   * it can be taken) and no master does (`latestMs`). Absent when a master holds it without expiry.
   */
  readonly freesInMs?: FreesIn;
  /** The highest fence counter among the masters: the last fencing token handed out, or higher. */
  readonly fence?: number;
  /** How many callers wait in its fair queue (the most any master has). */
  readonly waiting: number;
  /** Each master's answer, in the order of the engine's masters. */
  readonly masters: readonly MasterInspection[];
}

// KEYS[1] lock key, KEYS[2] queue, KEYS[3] holders, KEYS[4] fence. Writes nothing (no pruning
// either): dead entries are skipped by their deadline on the master's clock. Returns {tag,
// holder fingerprint, pttl, live holders, latest holder deadline from now, live waiters, fence,
// slots the live holders take}.
const INSPECT = script(
  'inspect',
  `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local value = redis.call('GET', KEYS[1])
local tag, holder = '', ''
if value then
  local head = string.sub(value, 1, 2)
  if head == '${READ.marker}' or head == '*s' then tag = string.sub(value, 2)
  elseif string.sub(value, 1, 1) == '~' then tag = '~'
  else tag = 'x'; holder = string.sub(redis.sha1hex(value), 1, 12) end
end
local holders, latest, used = 0, 0, 0
local entries = redis.call('HGETALL', KEYS[3])
for j = 1, #entries, 2 do
  local d, s = string.match(entries[j + 1], '^(%S+) (%S+)')
  d = tonumber(d)
  if d and d > now then
    holders = holders + 1
    used = used + #string.gsub(s, '[^,]', '') + 1
    if d - now > latest then latest = d - now end
  end
end
local waiting = 0
local queue = redis.call('HGETALL', KEYS[2])
for j = 1, #queue, 2 do
  local d = tonumber(string.match(queue[j + 1], '^%S+ (%S+)'))
  if d and d >= now then waiting = waiting + 1 end
end
return {tag, holder, redis.call('PTTL', KEYS[1]), holders, latest, waiting, redis.call('GET', KEYS[4]) or '', used}`,
);

/** How long an inspection waits for a master, as a round for a lock of this ttl would. */
const READ_AS_TTL_MS = 10_000;

/** Reads every master for each resource (one script call per resource and master, in parallel). */
export async function inspectResources(rounds: EngineRounds, resources: readonly string[]): Promise<LockInspection[]> {
  return Promise.all(resources.map((resource) => inspectOne(rounds, resource)));
}

async function inspectOne(rounds: EngineRounds, resource: string): Promise<LockInspection> {
  const { names } = rounds;
  const keys = [names.lock(resource), names.queue(resource), names.holders(resource), names.fence(resource)];
  const { replies, round } = await readEveryMaster(rounds, READ_AS_TTL_MS, (node) => node.run(INSPECT, keys, []));
  const masters = replies.map((reply, index): MasterInspection => {
    const node = rounds.nodes[index]!.name;
    if (reply === undefined) {
      const outcome = round.outcomes[index]!;
      return { node, state: 'unknown', ...(outcome.error ? { error: outcome.error } : { error: 'no answer' }) };
    }
    return masterInspection(node, reply);
  });
  return summarise(resource, masters, rounds.quorum);
}

function masterInspection(node: string, reply: unknown): MasterInspection {
  if (!Array.isArray(reply) || reply.length !== 8) return { node, state: 'unknown', error: 'an answer the inspect script cannot give' };
  const [tag, holder, pttl, holders, latest, waiting, fence, used] = reply as [string, string, number, number, number, number, string, number];
  return inspectionOf(node, { tag, holder, pttl, holders, used, latest, waiting, fence: fence === '' ? undefined : Number(fence) });
}

/** What a master (or the in-memory engine's model of one) holds for a resource, as the inspect script reads it. */
export interface MasterFacts {
  /** `''` free, `'~'` reserved, `'x'` a lock's token, `'r'` readers, `'s<limit>'` permits. */
  readonly tag: string;
  /** For `'x'`: the token's fingerprint. */
  readonly holder: string;
  readonly pttl: number;
  /** Live readers or permit holders, the permits they take, and the latest of their deadlines from now. */
  readonly holders: number;
  readonly used: number;
  readonly latest: number;
  readonly waiting: number;
  readonly fence: number | undefined;
}

/** The tag and fingerprint of a lock key's value, as the inspect script gives them: never the token. */
export function tagOf(value: string | undefined): Pick<MasterFacts, 'tag' | 'holder'> {
  if (value === undefined) return { tag: '', holder: '' };
  if (value.startsWith(READ.marker) || value.startsWith('*s')) return { tag: value.slice(1), holder: '' };
  if (value.startsWith('~')) return { tag: '~', holder: '' };
  return { tag: 'x', holder: createHash('sha1').update(value).digest('hex').slice(0, 12) };
}

export function inspectionOf(node: string, facts: MasterFacts): MasterInspection {
  const { tag, holder, pttl, holders, used, latest, waiting, fence } = facts;
  const fenceField = fence === undefined ? {} : { fence };
  const base = { node, waiting: Number(waiting), ...fenceField };
  if (tag === '') return { ...base, state: 'free' };
  // PTTL -1: a key set without expiry (not by this engine).
  const remaining = Number(pttl) >= 0 ? { remainingMs: Number(pttl) } : {};
  if (tag === '~') return { ...base, state: 'reserved', ...remaining };
  if (tag === 'x') return { ...base, state: 'held', kind: 'exclusive', holder, ...remaining };
  const shared = { ...base, state: 'held' as const, holders: Number(holders), remainingMs: Number(latest) };
  if (tag === 'r') return { ...shared, kind: 'read' };
  return { ...shared, kind: 'permits', limit: Number(tag.slice(1)), used: Number(used) };
}

/** What a majority says, from each master's answer. */
export function summarise(resource: string, masters: readonly MasterInspection[], quorum: number): LockInspection {
  const answered = masters.filter((master) => master.state !== 'unknown');
  const holding = answered.filter((master) => master.state === 'held' || master.state === 'reserved');
  const waiting = Math.max(0, ...answered.map((master) => master.waiting ?? 0));
  const fences = answered.flatMap((master) => (master.fence === undefined ? [] : [master.fence]));
  const fence = fences.length ? { fence: Math.max(...fences) } : {};
  const base = { resource, waiting, ...fence, masters };
  if (holding.length >= quorum) {
    const remaining = holding.map((master) => master.remainingMs ?? Infinity).sort((a, b) => b - a);
    const frees = remaining[0] === Infinity ? {} : { freesInMs: { earliestMs: remaining[quorum - 1]!, latestMs: remaining[0]! } };
    const kind = mostCommon(holding.flatMap((master) => (master.kind ? [master.kind] : [])));
    const held = holding.filter((master) => master.kind === kind);
    const holder = kind === 'exclusive' ? mostCommon(held.map((master) => master.holder!)) : undefined;
    const agreed = holder !== undefined && held.filter((master) => master.holder === holder).length >= quorum;
    const limit = kind === 'permits' ? held.find((master) => master.limit !== undefined)?.limit : undefined;
    const holders = kind === 'read' || kind === 'permits' ? Math.max(...held.map((master) => master.holders ?? 0)) : undefined;
    const used = kind === 'permits' ? Math.max(...held.map((master) => master.used ?? 0)) : undefined;
    return {
      ...base,
      state: 'held',
      ...(kind ? { kind } : {}),
      ...(limit === undefined ? {} : { limit }),
      ...(holders === undefined ? {} : { holders }),
      ...(used === undefined ? {} : { used }),
      ...(agreed ? { holder } : {}),
      ...frees,
    };
  }
  const free = answered.filter((master) => master.state === 'free').length;
  return { ...base, state: free >= quorum ? 'free' : 'unknown' };
}

function mostCommon<T>(values: readonly T[]): T | undefined {
  const counts = new Map<T, number>();
  let best: T | undefined;
  for (const value of values) {
    const count = (counts.get(value) ?? 0) + 1;
    counts.set(value, count);
    if (best === undefined || count > counts.get(best)!) best = value;
  }
  return best;
}
