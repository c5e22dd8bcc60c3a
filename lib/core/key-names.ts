/**
 * The names of what the engine keeps for a resource on the masters: its lock key, its fair
 * queue and its fence counter. With a Redis Cluster among the voters, each name carries the
 * resource as its hash tag (`redlock:{order:1}`, `redlock-queue:{order:1}`), so that all three
 * live in one hash slot and one script can touch them together.
 */
export class KeyNames {
  constructor(
    private readonly prefixes: {
      readonly keyPrefix: string;
      readonly queueKeyPrefix: string;
      readonly fenceKeyPrefix: string;
      readonly holdersKeyPrefix: string;
    },
    readonly hashTags: boolean,
  ) {}

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
    return this.hashTags ? `${prefix}{${resource}}` : prefix + resource;
  }
}
