import type { Redis, RedisKey } from 'ioredis';
import { monotonicNow } from '../base/clock.js';
import { CommandBatch, TickLane } from './command-batch.js';
import type { MasterAddress } from '../lock/instrumentation.js';
import { masterAddress } from './master-address.js';
import { QUEUE_ENTRY_STAY_MS, RELEASE_ONE_SCRIPT, RELEASE_SCRIPT, TAKE_SCRIPT, TAKEN, type LuaScript } from '../scripts/lua-scripts.js';
import { freedPerKey, takesPerKey } from '../scripts/script-replies.js';
import { redactCredentials } from '../base/redact.js';
import { AckedReply, shortestWait, waitForReplicas, type ReplicaWait } from './replica-acks.js';

/** What the engine learns when a master's identity check finds it restarted or replaced. */
export interface NodeRestart {
  readonly node: string;
  /**
   * 'promoted replica': at this engine's first sight the master had been promoted from a replica
   * (INFO replication `second_repl_offset` is set), at a moment it does not say; it may lack
   * keys its old master granted, so it waits as if it had just started.
   */
  readonly reason: 'run_id changed' | 'recent start' | 'promoted replica';
  /** How long the master has been up, as far as it says. */
  readonly uptimeMs: number;
}

/** One lock's compare-and-delete on this master, batched with the tick's other releases. */
export interface FreeRequest {
  readonly keys: readonly string[];
  readonly queueKeys: readonly string[];
  readonly token: string;
  /** The holder's queue entry to drop with it, '' for none. */
  readonly waiterId: string;
}

interface TakeRequest {
  readonly key: string;
  readonly token: string;
  readonly ttlMs: number;
  /** With replicaAcks: the replicas that must acknowledge the take before it counts. */
  readonly acks: ReplicaWait | undefined;
}

/** A vote that must not count yet: the master restarted within the quarantine window. */
export class NodeQuarantinedError extends Error {
  constructor(
    readonly node: string,
    readonly remainingMs: number,
  ) {
    super(`restarted recently; quarantined for ${Math.ceil(remainingMs)} ms more`);
  }
}

/**
 * A reply that must not count: the connection broke while the request was in flight and ioredis
 * sent it again over the next one, to a server this engine has not identified (a restarted
 * master, a promoted replica).
 */
export class NodeReconnectedError extends Error {
  constructor() {
    super('the connection was re-established while the request was in flight; the reply may come from another server');
  }
}

/**
 * One independent Redis master. Runs the lock scripts by EVALSHA and falls back to EVAL when
 * the server has lost its script cache (restart, SCRIPT FLUSH), without registering commands
 * on a client the caller may share with other code. Also keeps track of when the server
 * process behind the connection started, for the restart quarantine.
 */
export class RedisNode {
  /** `host:port`, the socket path, or `sentinel:<name>@<first sentinel>`: safe to log, never carries credentials. */
  readonly name: string;
  readonly address: MasterAddress;
  #startedAt: number | undefined;
  #runId: string | undefined;
  #identity: ReadonlySet<string> = new Set();
  #clusterNodeId: string | undefined;
  /** run_id and replication id: the server and its tenure as a master. */
  #term: string | undefined;
  #identifying: Promise<void> | undefined;
  #watching = false;
  #closes = 0;
  readonly #lane = new TickLane();
  readonly #takes = new CommandBatch<TakeRequest, unknown>(this.#lane, {
    one: (item) => (item.acks ? this.#sendTakeAcked(item, item.acks) : this.#sendTake(item)),
    // One engine's requests: all of a batch ask for acknowledgements, or none does.
    many: (items) => (items[0]!.acks ? this.#sendTakesAcked(items) : this.#sendTakes(items)),
  });
  readonly #frees = new CommandBatch<FreeRequest, number>(this.#lane, {
    one: (item) => this.#sendFree(item),
    many: (items) => this.#sendFrees(items),
    keys: (item) => item.keys.length,
  });

  constructor(readonly client: Redis) {
    this.address = masterAddress(client);
    this.name = this.address.name;
  }

  /**
   * SET NX PX of one key: TAKEN, or the PTTL of the key that is in the way (TAKE_SCRIPT). With
   * `acks`, a grant comes as an AckedReply: how many replicas acknowledged it.
   */
  take(key: string, token: string, ttlMs: number, acks?: ReplicaWait): Promise<unknown> {
    return this.#takes.add({ key, token, ttlMs, acks });
  }

  /** Compare-and-delete of a lock's keys (RELEASE_SCRIPT): how many were ours and are freed now. */
  free(request: FreeRequest): Promise<number> {
    return this.#frees.add(request);
  }

  async run(script: LuaScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    try {
      // Keys and arguments as one array, never spread: a call's arguments live on the stack, and
      // ioredis spreads them again on its way to the socket. It flattens the array (numbers go
      // out as their decimal text, as they would as separate arguments).
      return await this.client.evalsha(script.sha, keys.length, [...keys, ...args] as RedisKey[]);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      return this.client.eval(script.source, keys.length, [...keys, ...args] as RedisKey[]);
    }
  }

  /**
   * `run` for a script whose grant is a vote (acquire, extend, fence). With `acks`, WAIT goes out
   * right behind it, pipelined (no round trip before the write, one wait after it), and the
   * reply comes as an AckedReply.
   */
  write(script: LuaScript, keys: readonly string[], args: readonly (string | number)[], acks: ReplicaWait | undefined): Promise<unknown> {
    return acks ? this.#runAcked(script, keys, args, acks) : this.run(script, keys, args);
  }

  async #runAcked(script: LuaScript, keys: readonly string[], args: readonly (string | number)[], wait: ReplicaWait): Promise<AckedReply> {
    const argv = [...keys, ...args] as RedisKey[];
    const sent = this.client.evalsha(script.sha, keys.length, argv);
    let acked = waitForReplicas(this.client, wait);
    let reply: unknown;
    try {
      reply = await sent;
    } catch (error) {
      if (!isNoScript(error)) throw error;
      // That WAIT ran behind a script that never ran: wait again, behind the one that does.
      const resent = this.client.eval(script.source, keys.length, argv);
      acked = waitForReplicas(this.client, wait);
      reply = await resent;
    }
    return new AckedReply(reply, await acked, wait);
  }

  /** Alone: a plain command, no script to run; only a refusal costs a second one. */
  async #sendTake({ key, token, ttlMs }: TakeRequest): Promise<unknown> {
    if ((await this.client.set(key, token, 'PX', ttlMs, 'NX')) === 'OK') return TAKEN;
    return this.client.pttl(key);
  }

  async #sendTakes(items: readonly TakeRequest[]): Promise<readonly unknown[]> {
    const keys = items.map((item) => item.key);
    const args: (string | number)[] = [];
    for (const item of items) args.push(item.token, item.ttlMs);
    // EVAL, never EVALSHA: a take is never answered NOSCRIPT and re-sent, so a release may go out
    // right behind it on this connection (ExclusiveHolds.release relies on it). The source is
    // a few hundred bytes for a whole tick's takes.
    return takesPerKey(await this.client.eval(TAKE_SCRIPT.source, keys.length, [...keys, ...args] as RedisKey[]), items.length);
  }

  /** SET NX with its WAIT pipelined behind it; a refusal needs no acknowledgement. */
  async #sendTakeAcked({ key, token, ttlMs }: TakeRequest, wait: ReplicaWait): Promise<unknown> {
    const set = this.client.set(key, token, 'PX', ttlMs, 'NX');
    const acked = waitForReplicas(this.client, wait);
    if ((await set) === 'OK') return new AckedReply(TAKEN, await acked, wait);
    return this.client.pttl(key);
  }

  /** One WAIT behind the tick's script covers every key it set: one wait for the whole batch. */
  async #sendTakesAcked(items: readonly TakeRequest[]): Promise<readonly unknown[]> {
    const wait = shortestWait(items.map((item) => item.acks!));
    const replies = this.#sendTakes(items); // the EVAL is on the connection when this returns
    const acked = waitForReplicas(this.client, wait);
    const perKey = await replies;
    const count = await acked;
    return perKey.map((reply) => new AckedReply(reply, count, wait));
  }

  /** Alone: one lock's keys; a one-key lock, the common case, by the lighter script. */
  async #sendFree(item: FreeRequest): Promise<number> {
    if (item.keys.length > 1) return (await this.#sendFrees([item]))[0]!;
    const args = [item.token, item.waiterId, QUEUE_ENTRY_STAY_MS];
    return freedPerKey([await this.run(RELEASE_ONE_SCRIPT, [item.keys[0]!, item.queueKeys[0]!], args)], 1)[0]!;
  }

  async #sendFrees(items: readonly FreeRequest[]): Promise<number[]> {
    const keys: string[] = [];
    const queueKeys: string[] = [];
    const args: (string | number)[] = [QUEUE_ENTRY_STAY_MS];
    for (const item of items) {
      item.keys.forEach((key, index) => {
        keys.push(key);
        queueKeys.push(item.queueKeys[index]!);
        args.push(item.token, item.waiterId);
      });
    }
    const freed = freedPerKey(await this.run(RELEASE_SCRIPT, [...keys, ...queueKeys], args), keys.length);
    let at = 0;
    return items.map((item) => {
      let count = 0;
      for (let i = 0; i < item.keys.length; i++) count += freed[at++]!;
      return count;
    });
  }

  /**
   * Resolves once the server behind the current connection has said who it is and how long it
   * has been up. Every closed connection forgets it: a restart always breaks the connection,
   * so no vote is counted from a server that has not been identified since.
   */
  identify(onRestart: (restart: NodeRestart) => void, onIdentified: () => void = () => {}): Promise<void> {
    if (!this.#watching) {
      this.#watching = true;
      this.client.on('close', () => {
        this.#closes++;
        this.#startedAt = undefined;
        this.#identifying = undefined;
      });
    }
    if (this.#startedAt !== undefined) return Promise.resolve();
    this.#identifying ??= this.#readIdentity(onRestart, onIdentified).finally(() => {
      if (this.#startedAt === undefined) this.#identifying = undefined;
    });
    return this.#identifying;
  }

  /**
   * How many times the connection has closed since the engine first identified it: a request
   * whose reply arrives with another count than it left with crossed a reconnection.
   */
  get connection(): number {
    return this.#closes;
  }

  /** When the server started, on our monotonic clock (never earlier than it really did). */
  get startedAt(): number | undefined {
    return this.#startedAt;
  }

  /**
   * For a voter made of several servers (a Redis Cluster): how much longer the longest restart
   * quarantine of one of them lasts, while the others vote. Undefined for a single server.
   */
  shardsQuarantinedForMs(): number | undefined {
    return undefined;
  }

  /** Milliseconds the server has been up as far as we can prove (rounded down); undefined if unknown. */
  uptimeMs(): number | undefined {
    return this.#startedAt === undefined ? undefined : monotonicNow() - this.#startedAt;
  }

  /** The server's run_id as last read; kept after the connection closes, until read again. */
  get runId(): string | undefined {
    return this.#runId;
  }

  /**
   * Who this voter is, for telling two names of one voter apart: the server's run_id, or for a
   * Redis Cluster node its node id (what a Cluster voter of its cluster knows it by). Empty until
   * identified; kept after the connection closes, until read again.
   */
  get identity(): ReadonlySet<string> {
    return this.#identity;
  }

  /**
   * Set when the server is a Redis Cluster node (INFO cluster: `cluster_enabled:1`): a plain
   * client of one shard is no voter (its scripts fail with CROSSSLOT or MOVED, or see one shard's
   * keys); the cluster votes as one Cluster client.
   */
  get clusterNodeId(): string | undefined {
    return this.#clusterNodeId;
  }

  async #readIdentity(onRestart: (restart: NodeRestart) => void, onIdentified: () => void): Promise<void> {
    const [info, replication, cluster] = await Promise.all([this.client.info('server'), this.client.info('replication'), this.client.info('cluster')]);
    const runId = /^run_id:(\S+)/m.exec(info)?.[1];
    const uptimeSeconds = Number(/^uptime_in_seconds:(\d+)/m.exec(info)?.[1] ?? Number.NaN);
    if (!runId || !Number.isFinite(uptimeSeconds)) throw new Error('INFO server did not report run_id and uptime');
    // A promotion starts a new replication id and keeps the old one with the offset it ended at;
    // a server that never was a replica since it started has none (-1, or no field before Redis 4).
    const replicationId = /^master_replid:(\w+)/m.exec(replication)?.[1] ?? '';
    const promoted = Number(/^second_repl_offset:(-?\d+)/m.exec(replication)?.[1] ?? -1) !== -1;
    const term = `${runId}/${replicationId}`;
    const now = monotonicNow();
    // Whole seconds round down, so the age is never overstated.
    let startedAt = now - uptimeSeconds * 1000;
    // Another run_id with a long uptime is another server at the same address (failover, DNS);
    // the same run_id under a new replication id was a replica meanwhile (a failover and back)
    // and may have been resynced from a master that lacked our keys. Either never saw our keys.
    const replaced = this.#term !== undefined && this.#term !== term;
    // Seen for the first time already promoted: when it took over, and what it missed, is unknown.
    const promotedAtFirstSight = this.#term === undefined && promoted;
    if (replaced || promotedAtFirstSight) startedAt = Math.max(startedAt, now);
    // Only a misconfiguration costs the extra round trip.
    const clusterNodeId = /^cluster_enabled:1/m.test(cluster) ? String(await this.client.cluster('MYID')) : undefined;
    this.#runId = runId;
    this.#term = term;
    this.#clusterNodeId = clusterNodeId;
    this.#identity = new Set([clusterNodeId === undefined ? `run_id:${runId}` : clusterNodeKey(clusterNodeId)]);
    this.#startedAt = startedAt;
    onIdentified();
    if (replaced || promotedAtFirstSight) {
      onRestart({ node: this.name, reason: replaced ? 'run_id changed' : 'promoted replica', uptimeMs: uptimeSeconds * 1000 });
    }
  }
}

/** How a Redis Cluster node's id stands in a voter's identity: one for a plain client of it, all of them for its Cluster voter. */
export function clusterNodeKey(nodeId: string): string {
  return `cluster-node:${nodeId}`;
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

export function errorText(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return redactCredentials(text);
}
