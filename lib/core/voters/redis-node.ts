import { monotonicNow } from '../base/clock.js';
import { CommandBatch, TickLane } from './command-batch.js';
import type { MasterAddress } from '../lock/instrumentation.js';
import { definedScripts, type LuaScript } from '../scripts/lua-script.js';
import { redactCredentials } from '../base/redact.js';
import { AckedReply, waitForReplicas, type ReplicaWait } from './replica-acks.js';
import type { IdentifyBy } from '../lock/redlock-options.js';
import { readMarker } from './server-marker.js';
import { isNoScript, runScript, type MasterClient } from './clients/master-client.js';

/**
 * Why a master's votes stopped counting for a while: it was restarted or replaced
 * (`'run_id changed'`), it started recently (`'recent start'`), it was found promoted from a
 * replica (`'promoted replica'`), or (with `identifyBy: 'marker'`) its marker key was another
 * data set's than before (`'new data set'`). Any of these may have lost keys of live locks.
 */
export type RestartReason = 'run_id changed' | 'recent start' | 'promoted replica' | 'new data set';

/** How a master is identified (IdentifyBy), and the marker key for `'marker'`. */
export interface Identification {
  readonly by: IdentifyBy;
  readonly markerKey: string;
}

export const BY_INFO: Identification = { by: 'info', markerKey: '' };

/** What the engine learns when a master's identity check finds it restarted or replaced. */
export interface NodeRestart {
  readonly node: string;
  /**
   * 'promoted replica': at this engine's first sight the master had been promoted from a replica
   * (INFO replication `second_repl_offset` is set), at a moment it does not say; it may lack
   * keys its old master granted, so it waits as if it had just started.
   */
  readonly reason: RestartReason;
  /** How long the master has been up, as far as it says. */
  readonly uptimeMs: number;
}

/**
 * Requests that a master may take many of in one command: those of one tick on one connection
 * go out together (CommandBatch). Who sends them (a lock kind) says how; the master only lines
 * them up.
 */
export interface BatchedRequests<Item, Result> {
  /** A request alone in its tick. */
  one(node: RedisNode, item: Item): Promise<Result>;
  /** A tick's requests, as one command. */
  many(node: RedisNode, items: readonly Item[]): Promise<readonly Result[]>;
  /** How many keys a request carries (a batch is bounded by keys too). Default 1. */
  keys?(item: Item): number;
  /** On a voter that runs scripts one hash slot at a time (a Redis Cluster): each request apart. */
  apart(node: RedisNode, item: Item): Promise<Result>;
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
 * A reply that must not count: the connection broke while the request was in flight and the
 * client sent it again over the next one (ioredis does), to a server this engine has not
 * identified (a restarted master, a promoted replica).
 */
export class NodeReconnectedError extends Error {
  constructor() {
    super('the connection was re-established while the request was in flight; the reply may come from another server');
  }
}

/**
 * One independent Redis master, over whichever client library reached it (MasterClient). Runs
 * the lock scripts by EVALSHA and falls back to EVAL when the server has lost its script cache
 * (restart, SCRIPT FLUSH). Also keeps track of when the server process behind the connection
 * started, for the restart quarantine.
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
  /** The closes this node has taken into account: a new one forgets who the server is. */
  #seenCloses: number;
  readonly #lane = new TickLane();
  readonly #batches = new Map<BatchedRequests<never, unknown>, CommandBatch<never, unknown>>();

  constructor(readonly client: MasterClient) {
    this.address = client.address;
    this.name = this.address.name;
    this.#seenCloses = client.closes;
  }

  /** After a close of the connection, the server behind it is unknown until identified again. */
  #sinceLastClose(): void {
    if (this.#seenCloses === this.client.closes) return;
    this.#seenCloses = this.client.closes;
    this.#startedAt = undefined;
    this.#identifying = undefined;
  }

  /** Sends `item` with the other requests of its kind of this tick on this connection. */
  batched<Item, Result>(requests: BatchedRequests<Item, Result>, item: Item): Promise<Result> {
    let batch = this.#batches.get(requests as BatchedRequests<never, unknown>) as CommandBatch<Item, Result> | undefined;
    if (!batch) {
      batch = new CommandBatch<Item, Result>(this.#lane, {
        one: (one) => requests.one(this, one),
        many: (items) => requests.many(this, items),
        keys: requests.keys,
      });
      this.#batches.set(requests as BatchedRequests<never, unknown>, batch as unknown as CommandBatch<never, unknown>);
    }
    return batch.add(item);
  }

  /** Sends a script alone: at once, or behind this tick's batched requests made before it (TickLane). */
  run(script: LuaScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    // Keys and arguments as one array, never spread: a call's arguments live on the stack.
    const argv = [...keys, ...args];
    if (!this.#lane.waiting) return runScript(this.client, script.sha, script.source, keys.length, argv);
    return this.#lane.inOrder(() => runScript(this.client, script.sha, script.source, keys.length, argv));
  }

  /**
   * `run` for a script whose grant is a vote (acquire, extend, fence). With `acks`, WAIT goes out
   * right behind it, pipelined (no round trip before the write, one wait after it), and the
   * reply comes as an AckedReply.
   */
  write(script: LuaScript, keys: readonly string[], args: readonly (string | number)[], acks: ReplicaWait | undefined): Promise<unknown> {
    return acks ? this.#lane.inOrder(() => this.#runAcked(script, keys, args, acks)) : this.run(script, keys, args);
  }

  async #runAcked(script: LuaScript, keys: readonly string[], args: readonly (string | number)[], wait: ReplicaWait): Promise<AckedReply> {
    const argv = [...keys, ...args];
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

  /**
   * Resolves once the server behind the current connection has said who it is and how long it
   * has been up. Every closed connection forgets it: a restart always breaks the connection,
   * so no vote is counted from a server that has not been identified since.
   */
  identify(onRestart: (restart: NodeRestart) => void, onIdentified: () => void = () => {}, identification: Identification = BY_INFO): Promise<void> {
    this.#sinceLastClose();
    if (this.#startedAt !== undefined) return Promise.resolve();
    const read = () => (identification.by === 'marker' ? this.#readMarker(identification.markerKey, onRestart, onIdentified) : this.#readIdentity(onRestart, onIdentified));
    this.#identifying ??= read().finally(() => {
      if (this.#startedAt === undefined) this.#identifying = undefined;
    });
    return this.#identifying;
  }

  /**
   * How many times the connection has closed since the engine first identified it: a request
   * whose reply arrives with another count than it left with crossed a reconnection.
   */
  get connection(): number {
    return this.client.closes;
  }

  /** When the server started, on our monotonic clock (never earlier than it really did). */
  get startedAt(): number | undefined {
    this.#sinceLastClose();
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
    this.#sinceLastClose();
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
    const [info, replication, cluster] = await Promise.all([
      this.client.info('server'),
      this.client.info('replication'),
      this.client.info('cluster'),
      loadScripts(this.client, definedScripts()),
    ]);
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
    const clusterNodeId = /^cluster_enabled:1/m.test(cluster) ? String(await this.client.command('CLUSTER', ['MYID'])) : undefined;
    this.#runId = runId;
    this.#term = term;
    this.#clusterNodeId = clusterNodeId;
    this.#identity = new Set([clusterNodeId === undefined ? `run_id:${runId}` : clusterNodeKey(clusterNodeId)]);
    // A close while INFO was out: forgotten first, as the close came before this reply.
    this.#sinceLastClose();
    this.#startedAt = startedAt;
    onIdentified();
    if (replaced || promotedAtFirstSight) {
      onRestart({ node: this.name, reason: replaced ? 'run_id changed' : 'promoted replica', uptimeMs: uptimeSeconds * 1000 });
    }
  }

  /**
   * `identifyBy: 'marker'`: the data set's marker instead of INFO. The data set's age stands in
   * for the uptime (a marker written just now: a master that has just lost its keys, or is new);
   * another marker than this connection's last is another data set at the address, at once
   * quarantined like a changed run_id. What it cannot see is in server-marker.ts.
   */
  async #readMarker(key: string, onRestart: (restart: NodeRestart) => void, onIdentified: () => void): Promise<void> {
    const [marker] = await Promise.all([readMarker(this.client, key), loadScripts(this.client, definedScripts())]);
    const term = `marker:${marker.id}`;
    const now = monotonicNow();
    const replaced = this.#term !== undefined && this.#term !== term;
    const startedAt = replaced ? now : now - marker.ageMs;
    this.#runId = undefined;
    this.#term = term;
    this.#clusterNodeId = undefined;
    this.#identity = new Set([term]);
    this.#sinceLastClose();
    this.#startedAt = startedAt;
    onIdentified();
    if (replaced) onRestart({ node: this.name, reason: 'new data set', uptimeMs: marker.ageMs });
  }
}

/** How a Redis Cluster node's id stands in a voter's identity: one for a plain client of it, all of them for its Cluster voter. */
export function clusterNodeKey(nodeId: string): string {
  return `cluster-node:${nodeId}`;
}

/**
 * Loads the engine's scripts on a server as it is identified, in the same round trip: its first
 * rounds then run by SHA, without a NOSCRIPT reply and a second send. A second send would also
 * reach the server after anything the app sent it meanwhile, so a caller that reads a master
 * right after a grant could miss the key there. Once per connection of a client, however many
 * engines use it (node-redlock's users make one per call). Best effort: a user without SCRIPT
 * permission, or a server that forgets them, costs only the NOSCRIPT fallback.
 */
export function loadScripts(client: MasterClient, scripts: readonly LuaScript[]): Promise<void> {
  if (client.scriptsLoadedOn === client.closes) return Promise.resolve();
  client.scriptsLoadedOn = client.closes;
  return Promise.all(scripts.map((script) => client.command('SCRIPT', ['LOAD', script.source]))).then(
    () => undefined,
    () => undefined,
  );
}

export function errorText(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return redactCredentials(text);
}
