import { createHash } from 'node:crypto';
import { keySlot } from '../base/key-slot.js';
import { ACQUIRE_SCRIPT, EXTEND_SCRIPT, FENCE_SCRIPT, LEAVE_SCRIPT, RELEASE_SCRIPT, TAKE_SCRIPT, QUEUE_ENTRY_STAY_MS, type LuaScript } from '../scripts/lua-scripts.js';
import { UnexpectedReplyError } from '../scripts/script-replies.js';
import { SHARED_ACQUIRE_SCRIPT, SHARED_EXTEND_SCRIPT, SHARED_FENCE_SCRIPT, SHARED_RELEASE_SCRIPT } from '../kinds/shared/shared-scripts.js';

/**
 * The lock scripts as a Redis Cluster voter runs them. A script may only touch keys of one hash
 * slot, so a request over resources in several slots becomes one script per slot (`split`),
 * and their replies one reply as the whole request would have given (`merge`); an acquire
 * granted in some slots and refused in others is undone where it was granted, so a voter grants
 * all or nothing. Every script that grants a vote also says which server ran it (`identified`):
 * the cluster client follows a failover by itself, so only the reply can tell who voted.
 */

/** One script call on one slot: the original request's resources `indexes`, in order. */
export interface SlotCall {
  readonly slot: number;
  readonly keys: readonly string[];
  readonly args: readonly (string | number)[];
  readonly indexes: readonly number[];
}

/** Who ran a script: the shard master's run_id, uptime and replication id, from INFO inside the script. */
export interface ShardIdentity {
  readonly runId: string;
  readonly uptimeMs: number;
  /**
   * The server's run_id and replication id: its tenure as a master. A promotion always starts
   * a new replication id, so a server that was demoted and promoted again (a slot failing over
   * and back, M -> R -> M, without M ever restarting) has a new term though its run_id is the
   * same: it may lack what the other master granted meanwhile.
   */
  readonly term: string;
  /** Promoted from a replica since it started (INFO replication `second_repl_offset` is set). */
  readonly promoted: boolean;
}

/** Lua: {run_id, uptime in seconds, master_replid, second_repl_offset} of the server running the script. */
const WHO_LUA =
  "local server = redis.call('INFO', 'server') local replication = redis.call('INFO', 'replication') " +
  "local who = {string.match(server, 'run_id:(%x+)'), tonumber(string.match(server, 'uptime_in_seconds:(%d+)')), " +
  "string.match(replication, 'master_replid:(%x+)'), tonumber(string.match(replication, 'second_repl_offset:(%-?%d+)'))}";

interface Layout {
  /** How many resources the request covers. */
  count(keys: readonly string[], args: readonly (string | number)[]): number;
  /** The request restricted to the resources `indexes`. */
  part(keys: readonly string[], args: readonly (string | number)[], indexes: readonly number[]): { keys: string[]; args: (string | number)[] };
}

const pick = <T>(list: readonly T[], offset: number, indexes: readonly number[]): T[] => indexes.map((i) => list[offset + i]!);

/** A request's arguments restricted to the resources `indexes`. */
type ArgsOf = (args: readonly (string | number)[], indexes: readonly number[]) => (string | number)[];

/**
 * KEYS: blocks of one key per resource (lock keys, queue keys, then holders and fence keys as the
 * script has them). The count of resources is ARGV[argv], or the keys over `perResource`.
 */
function blocks(n: { argv: number } | { perResource: number }, rewriteArgs: ArgsOf): Layout {
  const count = (keys: readonly string[], args: readonly (string | number)[]) => ('argv' in n ? Number(args[n.argv]) : keys.length / n.perResource);
  return {
    count,
    part(keys, args, indexes) {
      const resources = count(keys, args);
      const parts: string[] = [];
      for (let offset = 0; offset < keys.length; offset += resources) parts.push(...pick(keys, offset, indexes));
      return { keys: parts, args: rewriteArgs(args, indexes) };
    },
  };
}

/** The same arguments for every resource. */
const same: ArgsOf = (args) => [...args];

/** ARGV[at] is the count of resources. */
const withCount = (at: number): ArgsOf => (args, indexes) => args.map((arg, i) => (i === at ? indexes.length : arg));

/** ARGV: `head` arguments (ARGV[at] the count of resources, when given), then one per resource. */
const perResource = (head: number, at?: number): ArgsOf => (args, indexes) => [
  ...(at === undefined ? args.slice(0, head) : withCount(at)(args.slice(0, head), indexes)),
  ...pick(args, head, indexes),
];

const LAYOUTS = new Map<LuaScript, Layout>([
  // ARGV: token, ttl, n, waiter id, ticket, stay.
  [ACQUIRE_SCRIPT, blocks({ argv: 2 }, withCount(2))],
  // ARGV: token, fence, n, expire.
  [FENCE_SCRIPT, blocks({ argv: 2 }, withCount(2))],
  // KEYS: the lock keys. ARGV: token, ttl.
  [EXTEND_SCRIPT, blocks({ perResource: 1 }, same)],
  // ARGV: stay, waiter id.
  [LEAVE_SCRIPT, blocks({ perResource: 2 }, same)],
  // ARGV: stay, then per key token and waiter id.
  [RELEASE_SCRIPT, blocks({ perResource: 2 }, (args, indexes) => [args[0]!, ...indexes.flatMap((i) => [args[1 + 2 * i]!, args[2 + 2 * i]!])])],
  // Readers and permits. ARGV: token, ttl, n, waiter id, ticket, stay, marker, limit, then per resource the preferred slot.
  [SHARED_ACQUIRE_SCRIPT, blocks({ argv: 2 }, perResource(8, 2))],
  // ARGV: token, fence, n, expire, marker, then per resource the slot.
  [SHARED_FENCE_SCRIPT, blocks({ argv: 2 }, perResource(5, 2))],
  // KEYS: lock keys, holders keys. ARGV: token, ttl, marker, then per resource the slot.
  [SHARED_EXTEND_SCRIPT, blocks({ perResource: 2 }, perResource(3))],
  // KEYS: lock, queue and holders keys. ARGV: stay, token, waiter id, marker, limit, then per resource the slot.
  [SHARED_RELEASE_SCRIPT, blocks({ perResource: 3 }, perResource(5))],
]);

/** The scripts whose grant is a vote: their replies say who ran them. */
const VOTES = new Set<LuaScript>([ACQUIRE_SCRIPT, EXTEND_SCRIPT, FENCE_SCRIPT, TAKE_SCRIPT, SHARED_ACQUIRE_SCRIPT, SHARED_EXTEND_SCRIPT, SHARED_FENCE_SCRIPT]);

/** Splits a request by hash slot of its lock keys; one call when they all share a slot. */
export function split(script: LuaScript, keys: readonly string[], args: readonly (string | number)[]): SlotCall[] {
  const layout = LAYOUTS.get(script);
  if (!layout || keys.length === 0) return [{ slot: keys.length ? keySlot(keys[0]!) : 0, keys, args, indexes: [0] }];
  const count = layout.count(keys, args);
  const bySlot = new Map<number, number[]>();
  for (let i = 0; i < count; i++) {
    const slot = keySlot(keys[i]!);
    const indexes = bySlot.get(slot);
    if (indexes) indexes.push(i);
    else bySlot.set(slot, [i]);
  }
  if (bySlot.size === 1) return [{ slot: bySlot.keys().next().value!, keys, args, indexes: [...bySlot.values()][0]! }];
  return [...bySlot].map(([slot, indexes]) => ({ slot, ...layout.part(keys, args, indexes), indexes }));
}

/**
 * One reply for the whole request from its per-slot replies, or `undo`: the calls that granted
 * an acquire that other slots refused, to be released.
 */
export function merge(script: LuaScript, calls: readonly SlotCall[], replies: readonly unknown[]): { reply: unknown; undo: SlotCall[] } {
  if (replies.length === 1) return { reply: replies[0], undo: [] };
  if (script === ACQUIRE_SCRIPT || script === SHARED_ACQUIRE_SCRIPT) return mergeAcquire(script, calls, replies);
  if (script === EXTEND_SCRIPT || script === FENCE_SCRIPT || script === SHARED_EXTEND_SCRIPT || script === SHARED_FENCE_SCRIPT) {
    return { reply: replies.every((reply) => reply === 1) ? 1 : 0, undo: [] };
  }
  if (script === LEAVE_SCRIPT) return { reply: 1, undo: [] };
  if (script === RELEASE_SCRIPT) {
    const freed = new Array<number>(resourcesOf(calls)).fill(0);
    calls.forEach((call, c) => {
      const perKey = replies[c];
      if (!Array.isArray(perKey) || perKey.length !== call.indexes.length) throw new UnexpectedReplyError('release', perKey);
      call.indexes.forEach((index, k) => (freed[index] = perKey[k] as number));
    });
    return { reply: freed, undo: [] };
  }
  if (script === SHARED_RELEASE_SCRIPT) {
    // How many resources were still held with our slot: summed over the slots.
    if (!replies.every((reply) => Number.isSafeInteger(reply))) throw new UnexpectedReplyError(script.name, replies.find((reply) => !Number.isSafeInteger(reply)));
    return { reply: (replies as number[]).reduce((sum, freed) => sum + freed, 0), undo: [] };
  }
  throw new Error(`${script.name} cannot be split by slot`);
}

/**
 * An acquire's per-slot replies as one. Granted only where every slot granted: {1, the highest
 * fence counter}, followed for readers and permits by the slot, then the free slots, of each
 * resource in the request's order. Otherwise the slots that granted are undone, and the reply is
 * a kind mismatch ({2, the resource's index in the whole request, what holds it}) if a slot found
 * one, else a refusal with the longest wait of the slots that refused.
 */
function mergeAcquire(script: LuaScript, calls: readonly SlotCall[], replies: readonly unknown[]): { reply: unknown; undo: SlotCall[] } {
  const granted = replies.map((reply) => Array.isArray(reply) && reply[0] === 1);
  const values = replies.map((reply) => (Array.isArray(reply) && typeof reply[1] === 'number' ? reply[1] : -2));
  const undo = calls.filter((_, i) => granted[i]);
  const mismatch = replies.findIndex((reply) => Array.isArray(reply) && reply[0] === 2);
  if (mismatch !== -1) {
    const [, at, found] = replies[mismatch] as unknown[];
    const index = typeof at === 'number' ? calls[mismatch]!.indexes[at - 1] : undefined;
    if (index === undefined) throw new UnexpectedReplyError(script.name, replies[mismatch]);
    return { reply: [2, index + 1, found], undo };
  }
  if (undo.length < calls.length) return { reply: [0, Math.max(...values.filter((_, i) => !granted[i]))], undo };
  const reply: unknown[] = [1, Math.max(...values)];
  if (script === SHARED_ACQUIRE_SCRIPT) {
    const total = resourcesOf(calls);
    calls.forEach((call, c) => {
      const perSlot = replies[c] as unknown[];
      const n = call.indexes.length;
      call.indexes.forEach((index, k) => {
        reply[2 + index] = perSlot[2 + k];
        reply[2 + total + index] = perSlot[2 + n + k];
      });
    });
  }
  return { reply, undo: [] };
}

const resourcesOf = (calls: readonly SlotCall[]) => calls.reduce((sum, call) => sum + call.indexes.length, 0);

/**
 * The release that takes back an acquire granted in `call`'s slot, for our token only: the
 * lock's compare-and-delete, or the shared holders' release of our entry.
 */
export function undoCall(script: LuaScript, call: SlotCall): { script: LuaScript; keys: readonly string[]; args: (string | number)[] } | undefined {
  const n = call.indexes.length;
  const token = call.args[0]!;
  if (script === ACQUIRE_SCRIPT) {
    const keys = call.keys.slice(0, 2 * n); // lock and queue keys, not the fence counters
    return { script: RELEASE_SCRIPT, keys, args: [QUEUE_ENTRY_STAY_MS, ...Array.from({ length: n }, () => [token, ''] as const).flat()] };
  }
  if (script === SHARED_ACQUIRE_SCRIPT) {
    const [marker, limit] = [call.args[6]!, call.args[7]!];
    const keys = call.keys.slice(0, 3 * n); // lock, queue and holders keys, not the fence counters
    return { script: SHARED_RELEASE_SCRIPT, keys, args: [QUEUE_ENTRY_STAY_MS, token, '', marker, limit, ...Array.from({ length: n }, () => '')] };
  }
  return undefined;
}

const identifiedScripts = new Map<LuaScript, LuaScript>();

/** The script as a Cluster voter sends it: a vote's reply comes as {reply, {run_id, uptime_s, master_replid}}. */
export function forCluster(script: LuaScript): LuaScript {
  if (!VOTES.has(script)) return script;
  let identified = identifiedScripts.get(script);
  if (!identified) {
    const source =
      `local function body()\n${script.source}\nend\nlocal reply = body()\n${WHO_LUA}\nreturn {reply, who}`;
    identified = { name: script.name, source, sha: sha1(source) };
    identifiedScripts.set(script, identified);
  }
  return identified;
}

/** Splits an identified reply into the script's own reply and who ran it. */
export function unwrap(script: LuaScript, reply: unknown): { reply: unknown; shard: ShardIdentity | undefined } {
  if (!VOTES.has(script)) return { reply, shard: undefined };
  if (!Array.isArray(reply) || reply.length !== 2) throw new UnexpectedReplyError(script.name, reply);
  return { reply: reply[0], shard: identity(script.name, reply[1]) };
}

/** Says which server runs it, as identified votes do. */
export const WHO_RUNS_THIS = `${WHO_LUA} return who`;

/** Reads {run_id, uptime in seconds, master_replid, second_repl_offset} as a script gave it. */
export function identity(script: string, reply: unknown): ShardIdentity {
  if (
    !Array.isArray(reply) || (reply.length !== 3 && reply.length !== 4) ||
    typeof reply[0] !== 'string' || typeof reply[1] !== 'number' || typeof reply[2] !== 'string' ||
    (reply.length === 4 && typeof reply[3] !== 'number')
  ) {
    throw new UnexpectedReplyError(script, reply);
  }
  // No fourth element: a server older than Redis 4, without the field, never says it was promoted.
  return { runId: reply[0], uptimeMs: reply[1] * 1000, term: `${reply[0]}/${reply[2]}`, promoted: reply.length === 4 && reply[3] !== -1 };
}

function sha1(source: string): string {
  return createHash('sha1').update(source).digest('hex');
}
