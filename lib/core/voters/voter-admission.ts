import { ClusterVoter } from './cluster-voter.js';
import { InvalidArgumentError } from '../base/errors.js';
import type { RestartQuarantine } from './restart-quarantine.js';
import { BY_INFO, type Identification, type RedisNode } from './redis-node.js';

/**
 * How a voter repeats another: `same server` (one server under two names: same run_id),
 * `same cluster` (two Cluster clients of one Redis Cluster: a node id in common),
 * `cluster node` (a plain client of a node of a Redis Cluster that is a voter as a whole).
 */
export type DuplicateKind = 'same server' | 'same cluster' | 'cluster node';

/** A master listed twice: `node` reaches the same server, or cluster, as `sameAs`. */
export interface DuplicateMaster {
  /** The name that repeats a master. */
  readonly node: string;
  /** Its place among the clients given. */
  readonly index: number;
  /** The master it repeats. */
  readonly sameAs: string;
  /** That master's place among the clients given. */
  readonly sameAsIndex: number;
  /** The same server, the same Redis Cluster, or a node of a Cluster given beside it. */
  readonly kind: DuplicateKind;
}

/** A vote that must never count: the server behind this name is already a voter under another. */
export class NodeDuplicateError extends Error {
  constructor(
    readonly node: string,
    readonly sameAs: string,
    readonly sameAsIndex: number,
    readonly kind: DuplicateKind = 'same server',
  ) {
    super(`${repeats(kind, sameAsIndex, sameAs)}; its votes do not count twice`);
  }
}

/** A vote that must never count: a plain client of one Redis Cluster node. */
export class NodeClusterModeError extends Error {
  constructor(readonly node: string) {
    super(CLUSTER_NODE);
  }
}

const CLUSTER_NODE =
  'a Redis Cluster node (cluster_enabled:1) given as a plain master: lock scripts fail there (CROSSSLOT, MOVED) ' +
  'and one shard is not an independent voter; give the whole cluster as one ioredis Cluster client';

/** What `node` is to `clients[index]` (`name`), in errors and warnings. */
export function repeats(kind: DuplicateKind, index: number, name: string): string {
  if (kind === 'cluster node') return `a node of the Redis Cluster clients[${index}] (${name})`;
  if (kind === 'same cluster') return `the same Redis Cluster (a node in common) as clients[${index}] (${name})`;
  return `the same server (run_id) as clients[${index}] (${name})`;
}

/**
 * Decides whether a master's answer may count as a vote. Every connection is asked who the
 * server is (INFO server: run_id, uptime; a Cluster voter: its node ids) before its first vote,
 * so that
 * - a server reached under two names (127.0.0.1 and localhost, two URLs, a proxy) votes once:
 *   the name identified first keeps the vote, the other's requests fail naming it; so does a
 *   Redis Cluster given as two Cluster clients;
 * - a plain client of a Redis Cluster node never votes: it is the duplicate of its cluster's
 *   Cluster voter, if there is one, otherwise a misconfiguration;
 * - a restarted or replaced master waits out the restart quarantine, when that is on.
 */
export class VoterAdmission {
  /** Which node speaks for each server (run_id) or cluster node (node id). */
  readonly #claims = new Map<string, RedisNode>();
  readonly #duplicateOf = new Map<RedisNode, RedisNode>();
  /** Per node whose connection has not said who it is yet: the one admission all its requests wait for. */
  readonly #admitting = new Map<RedisNode, Promise<void>>();

  constructor(
    private readonly nodes: readonly RedisNode[],
    private readonly quarantine: RestartQuarantine | undefined,
    private readonly onDuplicate: (duplicate: DuplicateMaster) => void,
    private readonly identification: Identification = BY_INFO,
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
      () => this.#claim(node),
      this.identification,
    );
  }

  /**
   * Identifies every master that answers, then rejects with InvalidArgumentError if two clients
   * reach one server or one Redis Cluster, if a client is a plain client of a Cluster node, or
   * if a Sentinel-managed client's Sentinels monitor no master of its name. Masters that do not
   * answer are skipped.
   */
  async verify(): Promise<void> {
    const unknownGroups = await Promise.all(this.nodes.map((node) => this.#identifyToVerify(node)));
    const [pair] = this.#duplicateOf;
    if (pair) throw this.#duplicateError(...pair);
    const clusterNode = this.nodes.findIndex((node) => node.clusterNodeId !== undefined);
    if (clusterNode !== -1) throw new InvalidArgumentError(`clients[${clusterNode}]`, this.nodes[clusterNode]!.name, CLUSTER_NODE);
    const unknownGroup = unknownGroups.findIndex((problem) => problem !== undefined);
    if (unknownGroup !== -1) {
      const group = this.nodes[unknownGroup]!.client.sentinel?.options.name ?? 'mymaster';
      throw new InvalidArgumentError(`clients[${unknownGroup}].name`, group, unknownGroups[unknownGroup]!);
    }
  }

  /**
   * Identifies `node`; for a Sentinel-managed master that cannot be, also listens to its
   * Sentinels: what it returns is why they cannot name its master, when it is a name none of
   * them monitors (its commands may wait for ever for a master they will never name).
   */
  async #identifyToVerify(node: RedisNode): Promise<string | undefined> {
    const identified = this.identify(node).then(
      () => true,
      () => false,
    );
    const sentinel = node.client.sentinel;
    if (!sentinel) return void (await identified);
    const sentinels = sentinel.watch();
    try {
      const first = await Promise.race([identified, sentinels.verdict]);
      if (first === true) return undefined;
      const verdict = first === false ? await sentinels.verdict : first;
      if (verdict.kind === 'no such master') return verdict.message;
      // The master has an address: it answers or is down, as any master. Unreachable Sentinels: skipped.
      if (verdict.kind === 'address given') await identified;
      return undefined;
    } finally {
      sentinels.stop();
    }
  }

  #duplicateError(duplicate: RedisNode, original: RedisNode): InvalidArgumentError {
    const kind = duplicateKind(duplicate, original);
    const index = (node: RedisNode) => this.nodes.indexOf(node);
    // Named in list order, whichever answered first; but a plain client of a Cluster node is the one at fault.
    const [first, second] = kind === 'cluster node' ? [original, duplicate] : [duplicate, original].sort((a, b) => index(a) - index(b));
    const advice = kind === 'same server' ? 'list every master once' : 'give a Redis Cluster once, as one Cluster client';
    return new InvalidArgumentError(`clients[${index(second!)}]`, second!.name, `${repeats(kind, index(first!), first!.name)}; ${advice}`);
  }

  #judge(node: RedisNode, uptimeMs: number): Promise<void> | undefined {
    const original = this.#duplicateOf.size > 0 ? this.#duplicateOf.get(node) : undefined;
    if (original) {
      if (shareIdentity(node, original)) {
        return Promise.reject(new NodeDuplicateError(node.name, original.name, this.nodes.indexOf(original), duplicateKind(node, original)));
      }
      // The other name reaches another server now: this one speaks for its server alone.
      this.#duplicateOf.delete(node);
      this.#claim(node);
      if (this.#duplicateOf.has(node)) return this.#judge(node, uptimeMs);
    }
    if (node.clusterNodeId !== undefined) return Promise.reject(new NodeClusterModeError(node.name));
    return this.quarantine?.judge(node, uptimeMs);
  }

  /**
   * The first node identified as a server (or cluster) speaks for it while it still says it
   * reaches it; but a plain client of a Cluster node never speaks for its cluster's Cluster voter.
   */
  #claim(node: RedisNode): void {
    for (const key of node.identity) {
      const holder = this.#claims.get(key);
      if (!holder || holder === node || !holder.identity.has(key)) continue;
      if (holder.clusterNodeId !== undefined && node.clusterNodeId === undefined) {
        this.#markDuplicate(holder, node);
        continue;
      }
      this.#markDuplicate(node, holder);
      return;
    }
    for (const key of node.identity) this.#claims.set(key, node);
    this.#duplicateOf.delete(node);
  }

  #markDuplicate(node: RedisNode, original: RedisNode): void {
    if (this.#duplicateOf.get(node) === original) return;
    this.#duplicateOf.set(node, original);
    this.onDuplicate({
      node: node.name,
      index: this.nodes.indexOf(node),
      sameAs: original.name,
      sameAsIndex: this.nodes.indexOf(original),
      kind: duplicateKind(node, original),
    });
  }
}

function shareIdentity(a: RedisNode, b: RedisNode): boolean {
  for (const key of a.identity) if (b.identity.has(key)) return true;
  return false;
}

function duplicateKind(node: RedisNode, original: RedisNode): DuplicateKind {
  if (!(original instanceof ClusterVoter)) return 'same server';
  return node instanceof ClusterVoter ? 'same cluster' : 'cluster node';
}
