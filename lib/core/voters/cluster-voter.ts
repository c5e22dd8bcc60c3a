import type { Cluster, Redis } from 'ioredis';
import { forCluster, identity, merge, split, undoCall, unwrap, WHO_RUNS_THIS, type ShardIdentity, type SlotCall } from './cluster-scripts.js';
import { keySlot } from '../base/key-slot.js';
import { definedScripts, type LuaScript } from '../scripts/lua-script.js';
import { clusterNodeKey, loadScripts, RedisNode, type BatchedRequests } from './redis-node.js';
import type { ShardQuarantine } from './shard-quarantine.js';
import { masterClientOf } from './clients/clients.js';
import { runScript } from './clients/master-client.js';

/**
 * A whole Redis Cluster as one voter. Everything the engine keeps for a resource carries the
 * resource as its hash tag (`redlock:{order:1}`), so one resource's scripts run on one shard;
 * a lock over resources in several slots runs one script per slot and counts as granted on
 * this voter only if every slot granted (the others are undone). Who answered is judged on
 * each reply (ShardQuarantine), since the client follows failovers by itself.
 */
export class ClusterVoter extends RedisNode {
  #shards: ShardQuarantine | undefined;
  #learning: Promise<void> | undefined;
  /** Every node of the cluster (CLUSTER NODES), as identity keys; undefined until read. */
  #members: ReadonlySet<string> | undefined;

  constructor(readonly cluster: Cluster) {
    super(masterClientOf(cluster));
  }

  /** With the restart quarantine on: judge every vote by the shard master that gave it. */
  watchShards(shards: ShardQuarantine): void {
    this.#shards = shards;
  }

  /**
   * Identity is judged per reply, against who owned each slot when the voter was first
   * identified: until that, and who the cluster is, are known (undefined), votes wait for them,
   * and fail if they cannot be read.
   */
  override uptimeMs(): number | undefined {
    return this.#members ? Number.MAX_SAFE_INTEGER : undefined;
  }

  /**
   * The cluster's node ids, masters and replicas: what another Cluster client of the same cluster
   * (given other startup nodes) or a plain client of one of its nodes shares with this voter.
   * They outlast failovers and restarts (nodes.conf), unlike run_ids.
   */
  override get identity(): ReadonlySet<string> {
    return this.#members ?? NO_MEMBERS;
  }

  /** How much longer the longest restart quarantine of one of its shards lasts, if any does. */
  override shardsQuarantinedForMs(): number | undefined {
    return this.#shards?.longestMs();
  }

  /** Reads who the cluster is and, with the shards watched, who owns every slot now, so that a failover after this is seen as one. */
  override identify(_onRestart?: unknown, onIdentified: () => void = () => {}): Promise<void> {
    // One reading shared by every caller (verifyMasters waits for the same one the constructor began).
    this.#learning ??= this.#learn().then(onIdentified, (error: unknown) => {
      this.#learning = undefined;
      throw error;
    });
    return this.#learning;
  }

  async #learn(): Promise<void> {
    // Right after it connects, the client replaces its connections to the startup nodes by those of
    // the slot map: a command caught in between fails ("Connection is closed"), once.
    const members = () => this.cluster.cluster('NODES');
    const [nodes] = await Promise.all([members().catch(members), this.#shards && this.#learnOwners(this.#shards), this.#loadScripts()]);
    this.#members = clusterMembers(String(nodes));
  }

  /** The engine's scripts, as this voter sends them, on every shard master (see loadScripts). */
  #loadScripts(): Promise<void> {
    const scripts = definedScripts().map(forCluster);
    return Promise.all(this.cluster.nodes('master').map((node: Redis) => loadScripts(masterClientOf(node), scripts))).then(() => undefined);
  }

  /**
   * Who owns each slot: CLUSTER SLOTS, then per range a script routed by a key of that range,
   * as a vote is routed, saying which server ran it.
   */
  async #learnOwners(shards: ShardQuarantine): Promise<void> {
    const ranges = (await this.cluster.cluster('SLOTS')) as unknown as [number, number][];
    const owners = await Promise.all(
      ranges.map(async ([from, to]) => ({ from, to, shard: identity('identify', await this.cluster.eval(WHO_RUNS_THIS, 1, keyInSlots(from, to))) })),
    );
    shards.learn(owners);
  }

  /** Every script runs per hash slot here: nothing is batched across resources. */
  override batched<Item, Result>(requests: BatchedRequests<Item, Result>, item: Item): Promise<Result> {
    return requests.apart(this, item);
  }

  override write(script: LuaScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    return this.run(script, keys, args);
  }

  /** One script per hash slot, their replies merged as one; partial acquires undone. */
  override async run(script: LuaScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    const calls = split(script, keys, args);
    const settled = await Promise.allSettled(calls.map((call) => this.#call(script, call)));
    const failure = settled.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
    const replies = settled.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : undefined));
    if (failure) {
      // Where a slot granted, take it back: this voter grants all or nothing.
      await this.#undo(script, calls.filter((_, i) => settled[i]!.status === 'fulfilled' && granted(replies[i])));
      throw failure.reason;
    }
    const { reply, undo } = merge(script, calls, replies);
    await this.#undo(script, undo);
    return reply;
  }

  async #call(script: LuaScript, call: SlotCall): Promise<unknown> {
    const sent = forCluster(script);
    const raw = await runScript(this.client, sent.sha, sent.source, call.keys.length, [...call.keys, ...call.args]);
    const { reply, shard } = unwrap(script, raw);
    const refusal = shard && this.#shards?.judge(shard, call.slot);
    if (refusal) throw refusal;
    return reply;
  }

  async #undo(script: LuaScript, calls: readonly SlotCall[]): Promise<void> {
    await Promise.all(
      calls.map((call) => {
        const undo = undoCall(script, call);
        if (!undo) return undefined;
        return this.client.eval(undo.script.source, undo.keys.length, [...undo.keys, ...undo.args]).catch(() => {});
      }),
    );
  }
}

/** A key whose hash slot is in [from, to]: what routes a command to that range's master. */
function keyInSlots(from: number, to: number): string {
  for (let i = 0; ; i++) {
    const slot = keySlot(`redlock-probe:${i}`);
    if (slot >= from && slot <= to) return `redlock-probe:${i}`;
  }
}

function granted(reply: unknown): boolean {
  return Array.isArray(reply) && reply[0] === 1;
}

const NO_MEMBERS: ReadonlySet<string> = new Set();

/** The node ids in CLUSTER NODES ("<id> <ip:port@cport> <flags> ..." per line), but nodes still in handshake, whose ids are provisional. */
function clusterMembers(nodes: string): ReadonlySet<string> {
  const members = new Set<string>();
  for (const line of nodes.split('\n')) {
    const [id, , flags] = line.trim().split(' ');
    if (id && flags !== undefined && !flags.split(',').includes('handshake')) members.add(clusterNodeKey(id));
  }
  if (members.size === 0) throw new Error('CLUSTER NODES named no node');
  return members;
}
