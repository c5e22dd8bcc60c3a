import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './free-port.js';
import { registry } from './process-cleanup.js';
import { findRedisServer } from './redis-binary.js';

/**
 * Throw-away redis-server processes for tests: N independent masters on random
 * 127.0.0.1 ports, each with its own temp dir, plus crash / stop / pause controls
 * for fault injection. The shared developer Redis on 6379 is never touched.
 */

export interface RedisNodeHandle {
  readonly index: number;
  readonly port: number;
  readonly host: '127.0.0.1';
  readonly url: string;
  /** pid of the live process; undefined while the node is down. */
  readonly pid: number | undefined;
  readonly running: boolean;
  readonly paused: boolean;
}

export interface FleetOptions {
  /** Default false: no persistence at all (`--save '' --appendonly no`). */
  appendonly?: boolean;
  /** Appended verbatim to the redis-server argv. */
  extraArgs?: string[];
  /** Per node, asked again at every start (a replica's master may have moved): appended after extraArgs. */
  argsFor?: (index: number) => string[];
  /**
   * Gives every node a cluster bus port (`--cluster-port`), picked with its port at first boot
   * (and picked again with it when either was taken meanwhile) and kept across restarts.
   */
  clusterBus?: boolean;
  /**
   * Runs every node as a Sentinel (`redis-server <conf> --sentinel`): the config it starts from,
   * written into the node's dir when the dir is fresh. Sentinel rewrites that file as it learns.
   */
  sentinelConfig?: (index: number) => string;
}

const READY_TIMEOUT_MS = 10_000;
const PROBE_TIMEOUT_MS = 1_000;
const STOP_GRACE_MS = 10_000;
const START_ATTEMPTS = 5;

// Every child and temp dir is also recorded in the process-wide registry, which
// SIGKILLs / removes them on exit, SIGINT or SIGTERM even if a test never stops its fleet.

/** Stops every fleet created in this process (e.g. from a global teardown). */
export async function stopAllFleets(): Promise<void> {
  await Promise.all([...registry.fleets].map((fleet) => fleet.stopAll()));
}

/**
 * Children are unref'd so a forgotten fleet cannot keep a plain script alive (the
 * exit hook kills it). While we really wait for one, hold the loop open ourselves.
 */
async function holdingLoop<T>(work: Promise<T>): Promise<T> {
  const keepAlive = setInterval(() => {}, 60_000);
  return work.finally(() => clearInterval(keepAlive));
}

class PortInUseError extends Error {}

/**
 * One readiness probe over a raw socket (no ioredis: the client under test must not
 * be part of the harness). PING must answer +PONG (not -LOADING), and INFO must
 * report *our* pid: if the port was grabbed by someone else's server in the
 * freePort race, that server would answer PONG too.
 */
function probe(port: number, pid: number, exited: Promise<void>): Promise<boolean> {
  return new Promise((resolve) => {
    let buffer = '';
    const socket: Socket = connect({ host: '127.0.0.1', port });
    const finish = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(PROBE_TIMEOUT_MS, () => finish(false));
    socket.on('error', () => finish(false));
    socket.once('close', () => finish(false));
    socket.once('connect', () => socket.write('PING\r\nINFO server\r\n'));
    // A dead child is final: do not sit out the probe timeout on a port someone else holds.
    void exited.then(() => finish(false));
    socket.on('data', (data: Buffer) => {
      buffer += data.toString('latin1');
      const match = /\r\nprocess_id:(\d+)\r\n/.exec(buffer);
      if (match) finish(buffer.startsWith('+PONG\r\n') && Number(match[1]) === pid);
    });
  });
}

class FleetNode implements RedisNodeHandle {
  readonly host = '127.0.0.1' as const;
  port = 0;
  busPort: number | undefined;
  child: ChildProcess | undefined;
  /** Settles when the current child has exited (and been reaped). */
  exited: Promise<void> = Promise.resolve();
  paused = false;
  stderrTail = '';
  /** Size of redis.log when the current child was spawned: failures only quote this run's lines. */
  logOffset = 0;

  constructor(
    readonly index: number,
    readonly dir: string,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }
  get pid(): number | undefined {
    return this.child?.pid;
  }
  get running(): boolean {
    return this.child !== undefined;
  }
  get logFile(): string {
    return join(this.dir, 'redis.log');
  }

  /** Why startup failed, with the end of the log so CI output is actionable. */
  async failure(reason: string): Promise<Error> {
    const log = await readFile(this.logFile).catch(() => Buffer.alloc(0));
    const tail = `${log.subarray(this.logOffset).toString('utf8').slice(-2_000)}${this.stderrTail}`.trim();
    const message = `redis-server node ${this.index} on port ${this.port} ${reason}\n--- log tail ---\n${tail}`;
    return /Address already in use/.test(tail) ? new PortInUseError(message) : new Error(message);
  }
}

export class RedisFleet {
  private readonly fleetNodes: FleetNode[];
  private stopping: Promise<void> | undefined;

  private constructor(
    count: number,
    private readonly binary: string,
    private readonly options: FleetOptions,
  ) {
    this.fleetNodes = Array.from({ length: count }, (_, index) => {
      const dir = mkdtempSync(join(tmpdir(), `redlock-fleet-${index}-`));
      registry.dirs.add(dir);
      return new FleetNode(index, dir);
    });
  }

  /** Starts `count` nodes in parallel; resolves once every one answers PING. */
  static async start(count: number, options: FleetOptions = {}): Promise<RedisFleet> {
    const fleet = new RedisFleet(count, findRedisServer(), options);
    registry.fleets.add(fleet);
    try {
      await Promise.all(fleet.fleetNodes.map((node) => fleet.launchWithRetry(node, true)));
    } catch (error) {
      await fleet.stopAll();
      throw error;
    }
    return fleet;
  }

  get nodes(): readonly RedisNodeHandle[] {
    return this.fleetNodes;
  }

  urls(): string[] {
    return this.fleetNodes.map((node) => node.url);
  }

  /** Crash: SIGKILL, resolves once the process is gone (port closed). */
  async kill(index: number): Promise<void> {
    const node = this.node(index);
    if (!node.child) return;
    node.child.kill('SIGKILL');
    await holdingLoop(node.exited);
  }

  /** Graceful: SIGTERM (redis shuts down, no RDB save is configured), wait for exit. */
  async stop(index: number): Promise<void> {
    const node = this.node(index);
    const child = node.child;
    if (!child) return;
    if (node.paused) child.kill('SIGCONT'); // a stopped process would sit on SIGTERM forever
    child.kill('SIGTERM');
    const timedOut = await holdingLoop(Promise.race([node.exited.then(() => false), sleep(STOP_GRACE_MS, true)]));
    if (timedOut) await this.kill(index);
  }

  /**
   * Starts a downed node again on the SAME port (clients configured with its URL
   * must find it again). keepData=false (default) wipes its dir so it comes back
   * empty, like a fresh replacement machine.
   */
  async start(index: number, opts: { keepData?: boolean } = {}): Promise<void> {
    if (this.stopping) throw new Error('fleet was stopped with stopAll()');
    const node = this.node(index);
    if (node.running) throw new Error(`node ${index} is already running (pid ${node.pid})`);
    if (!opts.keepData) {
      await rm(node.dir, { recursive: true, force: true });
      await mkdir(node.dir, { recursive: true });
    }
    await this.launchWithRetry(node, false);
  }

  async restart(index: number, opts: { keepData?: boolean } = {}): Promise<void> {
    await this.kill(index);
    await this.start(index, opts);
  }

  /** SIGSTOP: the kernel still accepts connections and buffers commands, nothing answers. */
  pause(index: number): void {
    const node = this.runningNode(index);
    node.child.kill('SIGSTOP');
    node.paused = true;
  }

  resume(index: number): void {
    const node = this.runningNode(index);
    node.child.kill('SIGCONT');
    node.paused = false;
  }

  /** Idempotent (and safe to call concurrently): kills every node, removes temp dirs. */
  stopAll(): Promise<void> {
    this.stopping ??= (async () => {
      await Promise.all(
        this.fleetNodes.map(async (node) => {
          if (node.child) {
            if (node.paused) node.child.kill('SIGCONT');
            node.child.kill('SIGKILL');
            await holdingLoop(node.exited);
          }
          await rm(node.dir, { recursive: true, force: true });
          registry.dirs.delete(node.dir);
        }),
      );
      registry.fleets.delete(this);
    })();
    return this.stopping;
  }

  // -------------------------------------------------------------------------

  private node(index: number): FleetNode {
    const node = this.fleetNodes[index];
    if (!node) throw new RangeError(`no node ${index} in a fleet of ${this.fleetNodes.length}`);
    return node;
  }

  private runningNode(index: number): FleetNode & { child: ChildProcess } {
    const node = this.node(index);
    if (!node.child) throw new Error(`node ${index} is not running`);
    return node as FleetNode & { child: ChildProcess };
  }

  /**
   * First boot (newPort): the port (and bus port) came from freePort() and may have been
   * taken in between, so just pick others. Restart must keep the port: redis sets
   * SO_REUSEADDR so TIME_WAIT does not block it, but back off and retry in case a
   * stray process holds it for a moment.
   */
  private async launchWithRetry(node: FleetNode, newPort: boolean): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      if (newPort) node.port = await freePort();
      if (newPort && this.options.clusterBus) {
        do {
          node.busPort = await freePort();
        } while (node.busPort === node.port);
      }
      try {
        return await this.launch(node);
      } catch (error) {
        if (!(error instanceof PortInUseError) || attempt >= START_ATTEMPTS) throw error;
        if (!newPort) await sleep(100 * attempt);
      }
    }
  }

  /** A Sentinel's config file (it must be writable: Sentinel saves what it learns there). */
  private async sentinelConfigFile(node: FleetNode): Promise<string> {
    const file = join(node.dir, 'sentinel.conf');
    await writeFile(file, this.options.sentinelConfig!(node.index), { flag: 'wx' }).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
    return file;
  }

  /** Spawns redis-server for `node` and resolves once it answers; rejects (child dead) otherwise. */
  private async launch(node: FleetNode): Promise<void> {
    if (node.port === 6379) throw new Error('refusing to start a test redis on 6379');
    const sentinel = this.options.sentinelConfig ? [await this.sentinelConfigFile(node), '--sentinel'] : [];
    const args = [
      ...sentinel,
      ...['--port', String(node.port), '--bind', '127.0.0.1', '--dir', node.dir],
      ...['--save', '', '--appendonly', this.options.appendonly ? 'yes' : 'no'],
      ...['--protected-mode', 'no', '--daemonize', 'no', '--logfile', node.logFile],
      ...(this.options.extraArgs ?? []),
      ...(node.busPort === undefined ? [] : ['--cluster-port', String(node.busPort)]),
      ...(this.options.argsFor?.(node.index) ?? []),
    ];
    node.logOffset = await stat(node.logFile).then((s) => s.size, () => 0);
    if (this.stopping) throw new Error('fleet was stopped with stopAll()'); // raced with stopAll()
    // No shell, not detached: the child stays in our process group, so a Ctrl-C in
    // the terminal reaches it too.
    const child = spawn(this.binary, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: false });
    registry.children.add(child);
    node.child = child;
    node.paused = false;
    node.stderrTail = '';
    let gone = false;
    node.exited = new Promise<void>((resolve) => {
      const onGone = (): void => {
        gone = true;
        registry.children.delete(child);
        if (node.child === child) {
          node.child = undefined;
          node.paused = false;
        }
        resolve();
      };
      child.once('exit', onGone);
      child.on('error', onGone); // spawn failure: 'exit' may never come
    });
    child.stderr?.on('data', (data: Buffer) => {
      node.stderrTail = (node.stderrTail + data.toString('utf8')).slice(-1_000);
    });
    child.unref();
    (child.stderr as Socket | null)?.unref();

    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (let delay = 5; ; delay = Math.min(delay * 2, 200)) {
      if (gone) throw await node.failure('exited during startup');
      if (child.pid !== undefined && (await probe(node.port, child.pid, node.exited))) return;
      if (gone) throw await node.failure('exited during startup');
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        await holdingLoop(node.exited);
        throw await node.failure(`did not answer PING within ${READY_TIMEOUT_MS} ms`);
      }
      await Promise.race([sleep(delay), node.exited]);
    }
  }
}
