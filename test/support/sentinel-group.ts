import { setTimeout as sleep } from 'node:timers/promises';
import { Redis, type RedisOptions } from 'ioredis';
import { lockClient } from './masters.js';
import { registry } from './process-cleanup.js';
import { RedisFleet, type RedisNodeHandle } from './redis-fleet.js';

/**
 * One Sentinel-managed master for tests: a master, its replicas and the Sentinels that watch
 * them, each a throw-away redis-server on a free 127.0.0.1 port in its own temp dir (Sentinels
 * are `redis-server <conf> --sentinel`), started and cleaned up like RedisFleet (the process
 * registry kills them even when a test never stops the group). `holdReplication()` cuts the
 * master's replicas off, so a test can make them miss the newest writes before a failover.
 *
 * The servers are symmetric: any of them may be the master. `failover()` forces one and waits
 * for the Sentinels' `+switch-master`; `restartAsReplica()` brings a crashed server back, empty,
 * as a replica of whoever is master now.
 */

export interface SentinelGroupOptions {
  /** The name the Sentinels monitor the master under (ioredis `name`). */
  readonly name: string;
  /** Replicas of the master. Default 1. */
  readonly replicas?: number;
  /**
   * Sentinels, with a quorum of a majority of them. Default 1 (quorum 1): enough for tests that
   * force their failovers; production runs 3 or more. 0: a master and its replicas, no Sentinel.
   */
  readonly sentinels?: number;
  /**
   * How long a silent master takes to be judged down (automatic failover). Default 10 s: the
   * tests force their failovers, and a loaded machine must not make one of its own.
   */
  readonly downAfterMs?: number;
}

/** Every wait of the harness is bounded by this. */
const WAIT_MS = 20_000;
const POLL_MS = 25;
const FAILOVER_TIMEOUT_MS = 4_000;
/** What holdReplication() sets on the master; nothing ever connects with it. */
const HOLD_PASSWORD = 'replication-held';
/** A replica's first sync starts at once, not after the 5 s Redis waits for more replicas by default. */
const SERVER_ARGS = ['--repl-diskless-sync-delay', '0'];
/** How long a restarted replica may take to acknowledge the master's stream before it is restarted again. */
const CATCH_UP_MS = 10_000;
const RESTARTS = 2;
/** Sentinel promotes only a replica whose INFO it read this recently (3 INFO periods). */
const PROMOTABLE_INFO_AGE_MS = 30_000;

export class SentinelGroup {
  readonly name: string;
  /** One single-node fleet per server: a server's role changes, its port does not. */
  readonly #servers: RedisFleet[] = [];
  #sentinels: RedisFleet | undefined;
  #master = 0;
  readonly #admin = new Map<number, Redis>();
  #stopping: Promise<void> | undefined;

  private constructor(private readonly options: SentinelGroupOptions) {
    this.name = options.name;
  }

  static async start(options: SentinelGroupOptions): Promise<SentinelGroup> {
    const group = new SentinelGroup(options);
    registry.fleets.add(group);
    try {
      await group.#launch();
    } catch (error) {
      await group.stopAll();
      throw error;
    }
    return group;
  }

  async #launch(): Promise<void> {
    this.#servers.push(await RedisFleet.start(1, { extraArgs: SERVER_ARGS, argsFor: () => this.#replicaArgs(0) }));
    const replicas = this.options.replicas ?? 1;
    for (let index = 1; index <= replicas; index++) {
      this.#servers.push(await RedisFleet.start(1, { extraArgs: SERVER_ARGS, argsFor: () => this.#replicaArgs(index) }));
    }
    await Promise.all(this.replicaIndexes().map((index) => this.#untilReplicating(index)));
    const count = this.options.sentinels ?? 1;
    if (count === 0) return;
    const quorum = Math.floor(count / 2) + 1;
    const masterPort = this.#port(0);
    const downAfter = this.options.downAfterMs ?? 10_000;
    this.#sentinels = await RedisFleet.start(count, {
      sentinelConfig: () =>
        [
          `sentinel monitor ${this.name} 127.0.0.1 ${masterPort} ${quorum}`,
          `sentinel down-after-milliseconds ${this.name} ${downAfter}`,
          `sentinel failover-timeout ${this.name} ${FAILOVER_TIMEOUT_MS}`,
          `sentinel parallel-syncs ${this.name} ${replicas}`,
          '',
        ].join('\n'),
    });
    await this.#untilPromotable(this.replicaIndexes());
  }

  /** ioredis options that reach this group's master through its Sentinels. */
  clientOptions(): { sentinels: { host: string; port: number }[]; name: string } {
    return { sentinels: this.sentinelPorts().map((port) => ({ host: '127.0.0.1', port })), name: this.name };
  }

  sentinelPorts(): number[] {
    if (!this.#sentinels) throw new Error(`group ${this.name} runs no Sentinel`);
    return this.#sentinels.nodes.map((node) => node.port);
  }

  /** The current master's own address (what a client without Sentinel would be given). */
  masterUrl(): string {
    return `redis://127.0.0.1:${this.#port(this.#master)}`;
  }

  /** Index of the server the Sentinels name as master, as of the last failover this group made. */
  get masterIndex(): number {
    return this.#master;
  }

  replicaIndexes(): number[] {
    return this.#servers.map((_, index) => index).filter((index) => index !== this.#master);
  }

  server(index: number): RedisNodeHandle {
    return this.#fleet(index).nodes[0]!;
  }

  /** Pids of the live servers and Sentinels of the group. */
  get pids(): number[] {
    const fleets = [...this.#servers, ...(this.#sentinels ? [this.#sentinels] : [])];
    return fleets.flatMap((fleet) => fleet.nodes.flatMap((node) => (node.pid === undefined ? [] : [node.pid])));
  }

  /** The servers and Sentinels this group runs. */
  get processCount(): number {
    return this.#servers.length + (this.#sentinels?.nodes.length ?? 0);
  }

  /** A plain client straight to one server (not through Sentinel): for looking at its keys. */
  direct(index: number): Redis {
    let client = this.#admin.get(index);
    if (!client) {
      client = new Redis({ host: '127.0.0.1', port: this.#port(index), maxRetriesPerRequest: 1, lazyConnect: false });
      client.on('error', () => {});
      this.#admin.set(index, client);
    }
    return client;
  }

  /**
   * Cuts the master's replication links and keeps its replicas from coming back: new
   * connections to the master need a password from now on (the connections already open, the
   * tests' and the Sentinels', stay as they are). Resolves once every replica says its link is
   * down: whatever the master writes after this, they miss. The Sentinels see nothing amiss
   * (a replica that lost its master for a few seconds may still be promoted).
   */
  async holdReplication(): Promise<void> {
    const replicas = this.replicaIndexes();
    // The admin connections open before the password, so the test can still look at every server.
    for (const index of [this.#master, ...replicas]) this.direct(index);
    const master = this.direct(this.#master);
    await master.config('SET', 'requirepass', HOLD_PASSWORD);
    await master.call('CLIENT', 'KILL', 'TYPE', 'replica');
    await Promise.all(replicas.map((index) => this.#untilReplicating(index, false)));
  }

  /** Lets the replicas back in: they resynchronise (missing writes included) before this resolves. */
  async releaseReplication(): Promise<void> {
    await this.direct(this.#master).config('SET', 'requirepass', '');
    await Promise.all(this.replicaIndexes().map((index) => this.#untilReplicating(index)));
  }

  /** SIGSTOP / SIGCONT a server: a paused replica acknowledges nothing until resumed. */
  pause(index: number): void {
    this.#fleet(index).pause(0);
  }

  resume(index: number): void {
    this.#fleet(index).resume(0);
  }

  /** Crash: SIGKILL, once the process is gone. */
  kill(index: number): Promise<void> {
    return this.#fleet(index).kill(0);
  }

  /**
   * Forces a failover (SENTINEL FAILOVER: no agreement needed, the master may be up or down)
   * and resolves with the index of the promoted server once the Sentinels announce the switch.
   */
  async failover(): Promise<number> {
    const sentinel = this.#sentinelClient();
    const subscriber = sentinel.duplicate();
    subscriber.on('error', () => {});
    try {
      const switched = new Promise<number>((resolve) => {
        subscriber.on('message', (_channel: string, message: string) => {
          // "<name> <old ip> <old port> <new ip> <new port>"
          const [name, , , , port] = message.split(' ');
          if (name === this.name) resolve(Number(port));
        });
      });
      await subscriber.subscribe('+switch-master');
      await this.#retrying('SENTINEL FAILOVER', async () => {
        try {
          await sentinel.call('SENTINEL', 'FAILOVER', this.name);
          return true;
        } catch (error) {
          // Another failover (automatic, after a crash) is already under way: it will switch too.
          if (/INPROG/.test((error as Error).message)) return true;
          if (/NOGOODSLAVE/.test((error as Error).message)) return false;
          throw error;
        }
      });
      const port = await withTimeout(switched, `${this.name}: no +switch-master`);
      const promoted = this.#servers.findIndex((fleet) => fleet.nodes[0]!.port === port);
      if (promoted < 0) throw new Error(`${this.name}: Sentinel promoted an unknown server on port ${port}`);
      this.#master = promoted;
      return promoted;
    } finally {
      subscriber.disconnect();
    }
  }

  /**
   * Starts a stopped server again, empty, as a replica of the current master, and resolves once
   * it has acknowledged the master's stream and the Sentinels could promote it.
   */
  async restartAsReplica(index: number): Promise<void> {
    if (index === this.#master) throw new Error(`server ${index} is the master`);
    const since = masterOffset(await this.direct(this.#master).info('replication'));
    for (let start = 1; ; start++) {
      this.#admin.get(index)?.disconnect();
      this.#admin.delete(index);
      await this.#fleet(index).start(0);
      await this.#untilReplicating(index);
      if (await this.#caughtUp(index, since)) break;
      // Seen twice under double load (Redis 7.0): link up, yet the replica processed nothing and
      // acknowledged nothing for 20 s (`slave_repl_offset:-1`, the master listing it at offset 0).
      // A stuck first sync is the server's, not what a test means to exercise: start it once more.
      if (start === RESTARTS) throw new Error(`server ${index} of ${this.name} replicated nothing after ${RESTARTS} restarts`);
      console.warn(`SentinelGroup ${this.name}: server ${index} replicated nothing ${CATCH_UP_MS} ms after its restart; restarting it`);
      await this.#fleet(index).kill(0);
    }
    await this.#untilPromotable([index]);
  }

  /** Idempotent: kills every process of the group, closes the proxies and admin clients. */
  stopAll(): Promise<void> {
    this.#stopping ??= (async () => {
      for (const client of this.#admin.values()) client.disconnect();
      this.#admin.clear();
      this.#sentinelAdmin?.disconnect();
      await Promise.all([...this.#servers, ...(this.#sentinels ? [this.#sentinels] : [])].map((fleet) => fleet.stopAll()));
      registry.fleets.delete(this);
    })();
    return this.#stopping;
  }

  // -------------------------------------------------------------------------

  #sentinelAdmin: Redis | undefined;

  #sentinelClient(): Redis {
    if (!this.#sentinelAdmin) {
      this.#sentinelAdmin = new Redis({ host: '127.0.0.1', port: this.sentinelPorts()[0]!, maxRetriesPerRequest: 1 });
      this.#sentinelAdmin.on('error', () => {});
    }
    return this.#sentinelAdmin;
  }

  #fleet(index: number): RedisFleet {
    const fleet = this.#servers[index];
    if (!fleet) throw new RangeError(`no server ${index} in group ${this.name}`);
    return fleet;
  }

  #port(index: number): number {
    return this.#fleet(index).nodes[0]!.port;
  }

  #replicaArgs(index: number): string[] {
    return index === this.#master ? [] : ['--replicaof', '127.0.0.1', String(this.#port(this.#master))];
  }

  /** Until the replica's own INFO says its link to the master is up (sync done), or down. */
  #untilReplicating(index: number, up = true): Promise<void> {
    return this.#retrying(`server ${index} of ${this.name} ${up ? 'replicating' : 'cut off'}`, async () => {
      const info = await this.direct(index).info('replication');
      return /^master_link_status:up/m.test(info) === up;
    });
  }

  /** Whether the replica acknowledges, within CATCH_UP_MS, the master's stream up to `offset`. */
  async #caughtUp(index: number, offset: number): Promise<boolean> {
    const deadline = performance.now() + CATCH_UP_MS;
    const port = this.#port(index);
    while (performance.now() < deadline) {
      const info = await this.direct(this.#master).info('replication');
      const listed = new RegExp(`^slave\\d+:ip=[^,]+,port=${port},state=online,offset=(\\d+)`, 'm').exec(info);
      // And by its own account: a replica stuck at `slave_repl_offset:-1` was once listed online
      // by the master, then acknowledged nothing more (CI on 338d861, beside a second suite).
      const own = /^slave_repl_offset:(-?\d+)/m.exec(await this.direct(index).info('replication').catch(() => ''));
      if (listed && Number(listed[1]) >= offset && own && Number(own[1]) >= offset) return true;
      await sleep(POLL_MS);
    }
    return false;
  }

  /**
   * Until every Sentinel lists these replicas as ones it would promote: connected, not down,
   * with a recent INFO (what Sentinel's replica selection asks of a candidate).
   */
  #untilPromotable(indexes: readonly number[]): Promise<void> {
    const ports = indexes.map((index) => this.#port(index));
    return Promise.all(
      this.sentinelPorts().map(async (sentinelPort) => {
        const sentinel = new Redis({ host: '127.0.0.1', port: sentinelPort, maxRetriesPerRequest: 1 });
        sentinel.on('error', () => {});
        try {
          await this.#retrying(`Sentinel ${sentinelPort} seeing the replicas of ${this.name}`, async () => {
            const replicas = ((await sentinel.call('SENTINEL', 'REPLICAS', this.name)) as unknown[]).map(fields);
            return ports.every((port) =>
              replicas.some(
                (replica) =>
                  Number(replica['port']) === port &&
                  replica['flags'] === 'slave' &&
                  Number(replica['info-refresh']) < PROMOTABLE_INFO_AGE_MS,
              ),
            );
          });
        } finally {
          sentinel.disconnect();
        }
      }),
    ).then(() => undefined);
  }

  /** Polls `check` until it says true; state that no event announces is read, never slept on. */
  async #retrying(what: string, check: () => Promise<boolean>): Promise<void> {
    const deadline = performance.now() + WAIT_MS;
    let last: unknown;
    for (;;) {
      try {
        if (await check()) return;
      } catch (error) {
        last = error;
      }
      if (performance.now() > deadline) {
        throw new Error(`timed out after ${WAIT_MS} ms waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
      }
      await sleep(POLL_MS);
    }
  }
}

/**
 * A lock client for a group's master, configured as a lock user should (no offline queue): it
 * asks the Sentinels where the master is, and again after every disconnection.
 */
export function sentinelClient(group: SentinelGroup, options: RedisOptions = {}): Redis {
  return lockClient(group.clientOptions(), options);
}

/**
 * Resolves once `client` is connected to the server on `port` (after a failover it first
 * retries the dead master, then asks the Sentinels again). Polls: no event says which server.
 */
export async function untilServes(client: Redis, port: number): Promise<void> {
  const deadline = performance.now() + WAIT_MS;
  for (;;) {
    const info = await client.info('server').catch(() => '');
    if (Number(/^tcp_port:(\d+)/m.exec(info)?.[1]) === port) return;
    if (performance.now() > deadline) throw new Error(`client did not reach the server on port ${port} within ${WAIT_MS} ms`);
    await sleep(POLL_MS);
  }
}

/** A Sentinel reply entry (a flat [field, value, ...] list, or a map under RESP3) as an object. */
function fields(entry: unknown): Record<string, string> {
  if (entry instanceof Map) return Object.fromEntries(entry) as Record<string, string>;
  const list = entry as string[];
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < list.length; i += 2) out[list[i]!] = list[i + 1]!;
  return out;
}

function withTimeout<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${WAIT_MS} ms`)), WAIT_MS);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

function masterOffset(info: string): number {
  return Number(/^master_repl_offset:(\d+)/m.exec(info)?.[1] ?? 0);
}
