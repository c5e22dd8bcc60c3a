import { InvalidArgumentError } from '../base/errors.js';

type Prefixes = {
  readonly keyFormat?: 'prefixed' | 'node-redlock';
  readonly keyPrefix: string;
  readonly queueKeyPrefix: string;
  readonly fenceKeyPrefix: string;
  readonly holdersKeyPrefix: string;
  readonly leaderKeyPrefix: string;
};

/**
 * The names of what the engine keeps for a resource on the masters: its lock key, its fair
 * queue, its readers' or permit holders' hash and its fence counter. With a Redis Cluster among
 * the voters, each name carries the resource as its hash tag (`redlock:{order:1}`,
 * `redlock-queue:{order:1}`), so that all four live in one hash slot and one script can touch
 * them together. What would break that is refused: prefixes whose own braces would make the
 * tags differ, and a resource that begins with `}` (its tag would be empty: Redis would hash each
 * whole name, each to its own slot).
 *
 * In node-redlock's format the lock key is the resource itself, so that node-redlock processes
 * see it; the other names keep their prefixes, and with a Cluster voter they carry the slot the
 * bare resource hashes to (its own hash tag, or the whole resource as the tag).
 */
export class KeyNames {
  /** With a Cluster voter, whether the prefixes carry one hash tag of their own (every resource in its slot). */
  readonly #fixedTag: boolean;

  readonly #bare: boolean;

  constructor(
    private readonly prefixes: Prefixes,
    readonly hashTags: boolean,
  ) {
    this.#bare = prefixes.keyFormat === 'node-redlock';
    if (this.#bare && hashTags) {
      for (const name of ['queueKeyPrefix', 'fenceKeyPrefix', 'holdersKeyPrefix', 'leaderKeyPrefix'] as const) {
        if (/[{}]/.test(prefixes[name])) {
          throw new InvalidArgumentError(name, prefixes[name], "with keyFormat 'node-redlock' and a Redis Cluster voter, prefixes hold no '{' or '}' (the resource's slot decides)");
        }
      }
    }
    this.#fixedTag = hashTags && !this.#bare && checkPrefixTags(prefixes);
  }

  lock(resource: string): string {
    if (this.#bare) return this.#bareLock(resource);
    return this.#name(this.prefixes.keyPrefix, resource);
  }

  queue(resource: string): string {
    return this.#name(this.prefixes.queueKeyPrefix, resource);
  }

  /** The readers or permit holders of a resource (`mode: 'read'`, `limit`). */
  holders(resource: string): string {
    return this.#name(this.prefixes.holdersKeyPrefix, resource);
  }

  fence(resource: string): string {
    return this.#name(this.prefixes.fenceKeyPrefix, resource);
  }

  /** Who leads the election whose lock is on `resource`, and in which term. */
  leader(resource: string): string {
    return this.#name(this.prefixes.leaderKeyPrefix, resource);
  }

  #bareLock(resource: string): string {
    const { queueKeyPrefix, fenceKeyPrefix, holdersKeyPrefix, leaderKeyPrefix } = this.prefixes;
    for (const prefix of [queueKeyPrefix, fenceKeyPrefix, holdersKeyPrefix, leaderKeyPrefix]) {
      // Its lock key would be another resource's queue, fence or holders key.
      if (resource.startsWith(prefix)) {
        throw new InvalidArgumentError('resource', resource, `with keyFormat 'node-redlock' a resource cannot begin with the engine's prefix ${JSON.stringify(prefix)}`);
      }
    }
    if (this.hashTags && !hasHashTag(resource) && resource.includes('}')) {
      throw new InvalidArgumentError('resource', resource, "with keyFormat 'node-redlock' and a Redis Cluster voter, a resource with '}' must hold a whole hash tag ({...}): its names must share a hash slot");
    }
    return resource;
  }

  #name(prefix: string, resource: string): string {
    if (!this.hashTags) return prefix + resource;
    // The bare lock key hashes by the resource's own tag, or by the whole resource: so must the rest.
    if (this.#bare) return hasHashTag(resource) ? prefix + resource : `${prefix}{${resource}}`;
    if (!this.#fixedTag && resource.startsWith('}')) {
      throw new InvalidArgumentError('resource', resource, "a resource cannot begin with '}' with a Redis Cluster voter (it is the names' hash tag)");
    }
    return `${prefix}{${resource}}`;
  }
}

/** Whether Redis Cluster hashes `key` by a tag of its own: a `{` followed later by a `}` with something between. */
function hasHashTag(key: string): boolean {
  const open = key.indexOf('{');
  if (open === -1) return false;
  const close = key.indexOf('}', open + 1);
  return close > open + 1;
}

/**
 * Whether the prefixes fix the hash tag themselves (each holds the same `{tag}`: every key in one
 * slot) rather than leave it to the resource (none holds a `{`). Anything else would put a
 * resource's names in different slots, where no script can touch them together: refused.
 */
function checkPrefixTags(prefixes: Prefixes): boolean {
  const names = ['keyPrefix', 'queueKeyPrefix', 'fenceKeyPrefix', 'holdersKeyPrefix', 'leaderKeyPrefix'] as const;
  const tags = names.map((name) => {
    const prefix = prefixes[name];
    const open = prefix.indexOf('{');
    if (open === -1) return undefined;
    const close = prefix.indexOf('}', open + 1);
    return close > open + 1 ? prefix.slice(open + 1, close) : '';
  });
  if (tags.every((tag) => tag === undefined)) return false;
  if (tags[0] && tags.every((tag) => tag === tags[0])) return true;
  // Blame a prefix with braces among prefixes without, or the first whose tag is empty or differs.
  const at = tags.includes(undefined) ? tags.findIndex((tag) => tag !== undefined) : tags.findIndex((tag) => tag === '' || tag !== tags[0]);
  throw new InvalidArgumentError(
    names[at]!,
    prefixes[names[at]!],
    "with a Redis Cluster voter, prefixes hold either no '{' or the same whole hash tag (a resource's names must share a hash slot)",
  );
}
