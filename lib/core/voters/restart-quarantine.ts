import { NodeQuarantinedError, type NodeRestart, type RedisNode, type RestartReason } from './redis-node.js';

/** The engine's `'quarantine'` event: a master's votes stop counting for a while, and why. */
export interface QuarantineNotice {
  /** The master, by host and port. */
  readonly node: string;
  /** Why its votes stopped counting: it restarted, started recently, or was promoted. */
  readonly reason: RestartReason;
  /** How long the master's votes will still not count. */
  readonly remainingMs: number;
}

/**
 * Spec section 5: a master restarted without persistence has forgotten the keys of live locks;
 * counting its vote could hand a second client a majority. Its votes are ignored until it has
 * been up for longer than any lock it could have forgotten (the window).
 */
export class RestartQuarantine {
  #longestTtlMs = 0;
  readonly #noticed = new WeakMap<RedisNode, number>();
  /** Why a master's identity check found it replaced or promoted, until the notice says so. */
  readonly #replaced = new WeakMap<RedisNode, NodeRestart['reason']>();
  /** Per master this engine saw restart, replaced or promoted: the start (startedAt) that was. */
  readonly #seenRestarting = new WeakMap<RedisNode, number | undefined>();

  constructor(
    /** A fixed window, or `'max-ttl'` for the longest ttl this engine has used. */
    private readonly window: number | 'max-ttl',
    private readonly notify: (notice: QuarantineNotice) => void,
    /** False: a master young at first sight votes; only a restart this engine sees is waited out. */
    readonly atFirstSight = true,
  ) {}

  /** Records a ttl the engine is about to use: the window grows to cover its locks. */
  observeTtl(ttlMs: number): void {
    if (ttlMs > this.#longestTtlMs) this.#longestTtlMs = ttlMs;
  }

  get windowMs(): number {
    return this.window === 'max-ttl' ? this.#longestTtlMs : this.window;
  }

  /** The master's connection found a different server than before (failover, DNS, restart), or a promoted replica at first sight. */
  replaced(node: RedisNode, reason: NodeRestart['reason']): void {
    this.#replaced.set(node, reason);
    this.#seenRestarting.set(node, node.startedAt);
  }

  /**
   * Undefined when the identified master's vote counts now (the common case costs no promise);
   * otherwise a rejection with NodeQuarantinedError: it is too young.
   */
  judge(node: RedisNode, uptimeMs: number): Promise<void> | undefined {
    const remaining = this.windowMs - uptimeMs;
    if (remaining <= 0) return undefined;
    // Young since before we first saw it: trusted when asked to (a restart we saw is not).
    if (!this.atFirstSight && this.#seenRestarting.get(node) !== node.startedAt) return undefined;
    if (this.#noticed.get(node) !== node.startedAt) {
      this.#noticed.set(node, node.startedAt!);
      const reason = this.#replaced.get(node) ?? 'recent start';
      this.#replaced.delete(node);
      this.notify({ node: node.name, reason, remainingMs: remaining });
    }
    return Promise.reject(new NodeQuarantinedError(node.name, remaining));
  }
}
