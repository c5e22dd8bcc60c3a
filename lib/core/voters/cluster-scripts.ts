import { keySlot } from '../base/key-slot.js';
import { sha1, type LuaScript, type SlotCall } from '../scripts/lua-script.js';
import { UnexpectedReplyError } from '../scripts/replies.js';

/**
 * Scripts as a Redis Cluster voter runs them, whichever they are: each script's own `cluster`
 * shape (scripts/lua-script.ts) says how a request over resources in several hash slots splits
 * into one call per slot (`split`), how their replies make one (`merge`), and how a grant in some
 * slots is taken back when others refused (`undoCall`), so a voter grants all or nothing. Every
 * script whose grant is a vote also says which server ran it (`forCluster`): the cluster client
 * follows a failover by itself, so only the reply can tell who voted.
 */

export type { SlotCall };

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

/** Splits a request by hash slot of its lock keys; one call when they all share a slot. */
export function split(script: LuaScript, keys: readonly string[], args: readonly (string | number)[]): SlotCall[] {
  const layout = script.cluster?.layout;
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
  const merged = script.cluster?.merge;
  if (!merged) throw new Error(`${script.name} cannot be split by slot`);
  return merged(calls, replies);
}

/** The release that takes back an acquire granted in `call`'s slot, for our token only. */
export function undoCall(script: LuaScript, call: SlotCall): { script: LuaScript; keys: readonly string[]; args: (string | number)[] } | undefined {
  return script.cluster?.undo?.(call);
}

const identifiedScripts = new Map<LuaScript, LuaScript>();

/** The script as a Cluster voter sends it: a vote's reply comes as {reply, {run_id, uptime_s, master_replid}}. */
export function forCluster(script: LuaScript): LuaScript {
  if (!script.cluster?.votes) return script;
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
  if (!script.cluster?.votes) return { reply, shard: undefined };
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

