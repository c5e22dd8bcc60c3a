import { createHash } from 'node:crypto';

/**
 * A Lua script the engine runs on a master, by EVALSHA with EVAL as the fallback. Each lock
 * kind, and the waiting layer, owns its scripts; the voters run whatever script they are given,
 * and learn how to run it on a Redis Cluster from the script's own `cluster` shape.
 */
export interface LuaScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
  /** How a Redis Cluster voter runs it; none: one call, its reply as it comes, not a vote. */
  readonly cluster?: ClusterShape;
}

/** One script call on one hash slot: the original request's resources `indexes`, in order. */
export interface SlotCall {
  readonly slot: number;
  readonly keys: readonly string[];
  readonly args: readonly (string | number)[];
  readonly indexes: readonly number[];
}

/**
 * What a Redis Cluster voter must know of a script. A script may only touch keys of one hash
 * slot, so a request over resources in several slots becomes one call per slot (`layout`), and
 * their replies one reply as the whole request would have given (`merge`); what an acquire was
 * granted in some slots and refused in others is taken back (`undo`), so a voter grants all or
 * nothing.
 */
export interface ClusterShape {
  /** Its grant is a vote: the voter must learn which server ran it (the client follows failovers by itself). */
  readonly votes: boolean;
  /** How the request splits by resource; none: it covers one key, one call. */
  readonly layout?: SlotLayout;
  /** The per-slot replies as one, and the calls whose grant must be taken back. */
  merge?(calls: readonly SlotCall[], replies: readonly unknown[]): { reply: unknown; undo: SlotCall[] };
  /** The release that takes back what `call` was granted, for our token only. */
  undo?(call: SlotCall): { script: LuaScript; keys: readonly string[]; args: (string | number)[] } | undefined;
}

export interface SlotLayout {
  /** How many resources the request covers. */
  count(keys: readonly string[], args: readonly (string | number)[]): number;
  /** The request restricted to the resources `indexes`. */
  part(keys: readonly string[], args: readonly (string | number)[], indexes: readonly number[]): { keys: string[]; args: (string | number)[] };
}

export function script(name: string, source: string, cluster?: ClusterShape): LuaScript {
  const made = { name, source, sha: sha1(source), ...(cluster ? { cluster } : {}) };
  defined.push(made);
  return made;
}

const defined: LuaScript[] = [];

/** Every script the engine's modules define: what a master is given to load when it is identified. */
export function definedScripts(): readonly LuaScript[] {
  return defined;
}

export function sha1(source: string): string {
  return createHash('sha1').update(source).digest('hex');
}

const pick = <T>(list: readonly T[], offset: number, indexes: readonly number[]): T[] => indexes.map((i) => list[offset + i]!);

/** A request's arguments restricted to the resources `indexes`. */
export type ArgsOf = (args: readonly (string | number)[], indexes: readonly number[]) => (string | number)[];

/**
 * KEYS: blocks of one key per resource (lock keys, queue keys, then holders and fence keys as the
 * script has them). The count of resources is ARGV[argv], or the keys over `perResource`.
 */
export function blocks(n: { argv: number } | { perResource: number }, rewriteArgs: ArgsOf): SlotLayout {
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
export const sameArgs: ArgsOf = (args) => [...args];

/** ARGV[at] is the count of resources. */
export const withCount = (at: number): ArgsOf => (args, indexes) => args.map((arg, i) => (i === at ? indexes.length : arg));

/** ARGV: `head` arguments (ARGV[at] the count of resources, when given), then one per resource. */
export const perResource = (head: number, at?: number): ArgsOf => (args, indexes) => [
  ...(at === undefined ? args.slice(0, head) : withCount(at)(args.slice(0, head), indexes)),
  ...pick(args, head, indexes),
];

/** How many resources a split request's calls cover together. */
export const resourcesOf = (calls: readonly SlotCall[]) => calls.reduce((sum, call) => sum + call.indexes.length, 0);
