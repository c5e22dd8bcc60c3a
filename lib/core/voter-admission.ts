import { InvalidArgumentError } from './errors.js';
import type { RestartQuarantine } from './restart-quarantine.js';
import { NodeDuplicateError, type RedisNode } from './redis-node.js';

/** A master listed twice: `node` reaches the same server (same run_id) as `sameAs`. */
export interface DuplicateMaster {
  readonly node: string;
  readonly index: number;
  readonly sameAs: string;
  readonly sameAsIndex: number;
}

/**
 * Decides whether a master's answer may count as a vote. Every connection is asked who the
 * server is (INFO server: run_id, uptime) before its first vote, so that
 * - a server reached under two names (127.0.0.1 and localhost, two URLs, a proxy) votes once:
 *   the name identified first keeps the vote, the other's requests fail naming it;
 * - a restarted or replaced master waits out the restart quarantine, when that is on.
 */
export class VoterAdmission {
  /** Which node speaks for each server (run_id). */
  readonly #claims = new Map<string, RedisNode>();
  readonly #duplicateOf = new Map<RedisNode, RedisNode>();
  /** Per node whose connection has not said who it is yet: the one admission all its requests wait for. */
  readonly #admitting = new Map<RedisNode, Promise<void>>();

  constructor(
    private readonly nodes: readonly RedisNode[],
    private readonly quarantine: RestartQuarantine | undefined,
    private readonly onDuplicate: (duplicate: DuplicateMaster) => void,
  ) {}

  /**
   * Undefined when the master's vote counts now (the common case costs no promise); otherwise
   * a promise that identifies it first and rejects if its vote must not count.
   */
  admit(node: RedisNode): Promise<void> | undefined {
    const uptime = node.uptimeMs();
    if (uptime !== undefined) return this.#judge(node, uptime);
    let admission = this.#admitting.get(node);
    if (!admission) {
      admission = this.identify(node).then(() => this.#judge(node, node.uptimeMs()!));
      this.#admitting.set(node, admission);
      const done = () => void this.#admitting.delete(node);
      admission.then(done, done);
    }
    return admission;
  }

  /**
   * The admission `node`'s requests are waiting for, if any. A request that must not overtake
   * them on the connection (a release behind a take) is sent from a callback on this same
   * promise: callbacks run in the order they were added, so it goes out right behind them.
   */
  pending(node: RedisNode): Promise<void> | undefined {
    return this.#admitting.get(node);
  }

  /** Reads who the server behind `node` is, if its connection has not said so yet. */
  identify(node: RedisNode): Promise<void> {
    return node.identify(
      (restart) => this.quarantine?.replaced(node, restart.reason),
      (runId) => this.#claim(node, runId),
    );
  }

  /**
   * Identifies every master that answers, then rejects with InvalidArgumentError if two names
   * reach one server. Masters that do not answer are skipped.
   */
  async verify(): Promise<void> {
    await Promise.all(this.nodes.map((node) => this.identify(node).catch(() => {})));
    const [pair] = this.#duplicateOf;
    if (!pair) return;
    // Named in list order, whichever of the two answered first and keeps the vote.
    const [first, second] = pair.map((node) => ({ index: this.nodes.indexOf(node), name: node.name })).sort((a, b) => a.index - b.index);
    throw new InvalidArgumentError(
      `clients[${second!.index}]`,
      second!.name,
      `the same server (run_id) as clients[${first!.index}] (${first!.name}); list every master once`,
    );
  }

  #judge(node: RedisNode, uptimeMs: number): Promise<void> | undefined {
    const original = this.#duplicateOf.size > 0 ? this.#duplicateOf.get(node) : undefined;
    if (original) {
      if (original.runId === node.runId) {
        return Promise.reject(new NodeDuplicateError(node.name, original.name, this.nodes.indexOf(original)));
      }
      // The other name reaches another server now: this one speaks for its server alone.
      this.#duplicateOf.delete(node);
      this.#claims.set(node.runId!, node);
    }
    return this.quarantine?.judge(node, uptimeMs);
  }

  /** The first node identified as a server speaks for it while it still says it reaches it. */
  #claim(node: RedisNode, runId: string): void {
    const holder = this.#claims.get(runId);
    if (holder && holder !== node && holder.runId === runId) {
      if (this.#duplicateOf.get(node) !== holder) {
        this.#duplicateOf.set(node, holder);
        this.onDuplicate(this.#describe(node, holder));
      }
      return;
    }
    this.#claims.set(runId, node);
    this.#duplicateOf.delete(node);
  }

  #describe(node: RedisNode, original: RedisNode): DuplicateMaster {
    return { node: node.name, index: this.nodes.indexOf(node), sameAs: original.name, sameAsIndex: this.nodes.indexOf(original) };
  }
}
