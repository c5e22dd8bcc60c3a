import { QuorumUnreachableError } from '../base/errors.js';
import type { Lock } from '../lock/lock.js';
import type { EngineRounds } from '../rounds/engine-rounds.js';
import { readEveryMaster } from '../rounds/read-round.js';
import type { RoundReply } from '../rounds/quorum-round.js';
import { script } from '../scripts/lua-script.js';

/** Who leads an election now, as a majority of masters has it. */
export interface LeaderInfo {
  /** The election's name. */
  readonly election: string;
  /** What the leader campaigned as (`election.campaign(identity)`): a pod name, a host and pid. */
  readonly identity: string;
  /** The leader's term: its lock's fencing token, larger than every earlier leader's. */
  readonly term: number;
  /** How long a majority of masters still holds the leader's lease, in ms, when they answered. */
  readonly leaseRemainingMs: number;
}

/** Where an election says who leads it: on the masters, or in the in-memory engine's model of them. */
export interface LeaderRecords {
  /** Records `identity` as the holder of `lock`, where the masters still give the lock to it. */
  write(lock: Lock, identity: string): Promise<void>;
  /** The leader a majority agrees on, null when a majority knows of none; rejects when too few masters answer. */
  read(election: string, resource: string, leaseMs: number): Promise<LeaderInfo | null>;
}

// KEYS[1] the election's lock key, KEYS[2] its record; ARGV[1] the lock's token, ARGV[2] the term,
// ARGV[3] the identity. Written only by the holder, and for as long as the lock lives there: a
// record never outlives its lease, and one of a leader that lost the key is never written.
const WRITE = script(
  'leader-record-write',
  `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[1] .. '\\n' .. ARGV[2] .. '\\n' .. ARGV[3], 'PX', math.max(redis.call('PTTL', KEYS[1]), 1))
return 1`,
);

// KEYS as above. The lock's value and ttl, and the record if it is the same holder's: {token, pttl, term, identity}.
const READ = script(
  'leader-record-read',
  `local token = redis.call('GET', KEYS[1])
if not token then return {} end
local record = redis.call('GET', KEYS[2])
if not record then return {token, redis.call('PTTL', KEYS[1])} end
local a = string.find(record, '\\n', 1, true)
local b = string.find(record, '\\n', a + 1, true)
if string.sub(record, 1, a - 1) ~= token then return {token, redis.call('PTTL', KEYS[1])} end
return {token, redis.call('PTTL', KEYS[1]), string.sub(record, a + 1, b - 1), string.sub(record, b + 1)}`,
);

/** A master's view of an election: nobody holds its lock, or who does (with a record once the leader wrote it). */
type MasterView = { readonly token: string; readonly pttl: number; readonly term?: number; readonly identity?: string } | null;

/** The records on the masters, written and read in rounds as locks are (restart quarantine and timeouts alike). */
export class MasterLeaderRecords implements LeaderRecords {
  constructor(private readonly rounds: EngineRounds) {}

  async write(lock: Lock, identity: string): Promise<void> {
    const { rounds } = this;
    const resource = lock.resources[0]!;
    const keys = [lock.keys[0]!, rounds.names.leader(resource)];
    const args = [lock.token, lock.fence ?? 0, identity];
    await rounds.round(lock.ttlMs, grantedIfWritten, rounds.vote((node) => node.run(WRITE, keys, args)), 'extend');
  }

  async read(election: string, resource: string, leaseMs: number): Promise<LeaderInfo | null> {
    const { rounds } = this;
    const keys = [rounds.names.lock(resource), rounds.names.leader(resource)];
    const { replies, round: result } = await readEveryMaster(rounds, leaseMs, (node) => node.run(READ, keys, []));
    const views = replies.map((reply) => (reply === undefined ? undefined : masterView(reply)));
    const known = views.filter((view): view is MasterView => view !== undefined);
    if (known.length < rounds.quorum) throw new QuorumUnreachableError([resource], rounds.quorum, result.outcomes, 'too few masters answered to say who leads');
    return leaderOf(election, known, rounds.quorum);
  }
}

/**
 * The leader a majority of masters agrees on: at least `quorum` of them hold the same token and
 * its record. Its lease is the shortest among the longest `quorum` ttls: a majority holds it that long.
 */
export function leaderOf(election: string, views: readonly MasterView[], quorum: number): LeaderInfo | null {
  const byToken = new Map<string, { term?: number; identity?: string; pttls: number[] }>();
  for (const view of views) {
    if (!view) continue;
    const seen = byToken.get(view.token) ?? { pttls: [] };
    seen.pttls.push(view.pttl);
    if (view.identity !== undefined) Object.assign(seen, { term: view.term, identity: view.identity });
    byToken.set(view.token, seen);
  }
  for (const seen of byToken.values()) {
    if (seen.pttls.length < quorum || seen.identity === undefined) continue;
    const pttls = seen.pttls.sort((a, b) => b - a);
    return { election, identity: seen.identity, term: seen.term!, leaseRemainingMs: Math.max(0, pttls[quorum - 1]!) };
  }
  return null;
}

function masterView(reply: unknown): MasterView {
  if (!Array.isArray(reply) || reply.length === 0) return null;
  const [token, pttl, term, identity] = reply as [string, number, string?, string?];
  return identity === undefined ? { token: String(token), pttl: Number(pttl) } : { token: String(token), pttl: Number(pttl), term: Number(term), identity: String(identity) };
}

const grantedIfWritten = (reply: unknown): RoundReply => ({ granted: reply === 1 });
