import { InvalidArgumentError } from '../base/errors.js';

type Prefixes = {
  readonly keyPrefix: string;
  readonly queueKeyPrefix: string;
  readonly fenceKeyPrefix: string;
  readonly holdersKeyPrefix: string;
};

/**
 * The names of what the engine keeps for a resource on the masters: its lock key, its fair
 * queue, its readers' or permit holders' hash and its fence counter. With a Redis Cluster among
 * the voters, each name carries the resource as its hash tag (`redlock:{order:1}`,
 * `redlock-queue:{order:1}`), so that all four live in one hash slot and one script can touch
 * them together. What would break that is refused: prefixes whose own braces would make the
 * tags differ, and a resource that begins with `}` (its tag would be empty: Redis would hash each
 * whole name, each to its own slot).
 */
export class KeyNames {
  /** With a Cluster voter, whether the prefixes carry one hash tag of their own (every resource in its slot). */
  readonly #fixedTag: boolean;

  constructor(
    private readonly prefixes: Prefixes,
    readonly hashTags: boolean,
  ) {
    this.#fixedTag = hashTags && checkPrefixTags(prefixes);
  }

  lock(resource: string): string {
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

  #name(prefix: string, resource: string): string {
    if (!this.hashTags) return prefix + resource;
    if (!this.#fixedTag && resource.startsWith('}')) {
      throw new InvalidArgumentError('resource', resource, "a resource cannot begin with '}' with a Redis Cluster voter (it is the names' hash tag)");
    }
    return `${prefix}{${resource}}`;
  }
}

/**
 * Whether the prefixes fix the hash tag themselves (each holds the same `{tag}`: every key in one
 * slot) rather than leave it to the resource (none holds a `{`). Anything else would put a
 * resource's names in different slots, where no script can touch them together: refused.
 */
function checkPrefixTags(prefixes: Prefixes): boolean {
  const names = ['keyPrefix', 'queueKeyPrefix', 'fenceKeyPrefix', 'holdersKeyPrefix'] as const;
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
