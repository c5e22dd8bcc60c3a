import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { exited, track } from './children.js';

const READY_TIMEOUT_MS = 10_000;
/** Never started on, nor handed out: a developer's own Redis lives there. */
const RESERVED_PORT = 6379;

/**
 * A throw-away redis-server on a free loopback port, with no persistence: the demo's lock
 * masters and its store. kill() crashes it (SIGKILL); restart() brings it back empty on the
 * same port, so the app's connections, configured with its URL, find it again.
 */
export class RedisServer {
  private child: ChildProcess | undefined;

  private constructor(
    readonly name: string,
    private readonly dir: string,
    private readonly binary: string,
    private port: number,
  ) {}

  /** Starts a server under `dir` (created), retrying on another port if one is taken meanwhile. */
  static async start(name: string, dir: string): Promise<RedisServer> {
    const server = new RedisServer(name, dir, findRedisServer(), 0);
    for (let attempt = 1; ; attempt++) {
      server.port = await freePort();
      try {
        await server.launch();
        return server;
      } catch (error) {
        if (attempt >= 5) throw error;
      }
    }
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.child !== undefined;
  }

  /** Crash: SIGKILL, resolves once the process is gone. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child) return;
    child.kill('SIGKILL');
    await exited(child);
  }

  /** Starts it again on the same port, empty (no persistence), like a replaced machine. */
  async restart(): Promise<void> {
    if (this.child) throw new Error(`${this.name} is still running`);
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.launch();
      } catch (error) {
        if (attempt >= 5) throw error;
        await sleep(200 * attempt); // the old socket may linger a moment
      }
    }
  }

  private async launch(): Promise<void> {
    if (this.port === RESERVED_PORT) throw new Error(`refusing to start ${this.name} on ${RESERVED_PORT}`);
    rmSync(this.dir, { recursive: true, force: true });
    mkdirSync(this.dir, { recursive: true });
    const log = join(this.dir, 'redis.log');
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--logfile', log];
    args.push('--save', '', '--appendonly', 'no', '--protected-mode', 'no', '--daemonize', 'no');
    const child = spawn(this.binary, args, { stdio: 'ignore' });
    track(child);
    this.child = child;
    const gone = exited(child).then(() => {
      if (this.child === child) this.child = undefined;
    });
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (!(await ours(this.port, child.pid!))) {
      if (!this.child || Date.now() > deadline) {
        child.kill('SIGKILL');
        await gone;
        const tail = tailOf(log);
        throw new Error(`${this.name} (redis-server on port ${this.port}) did not start:\n${tail}`);
      }
      await Promise.race([sleep(20), gone]);
    }
  }
}

function tailOf(file: string): string {
  try {
    return readFileSync(file, 'utf8').slice(-500);
  } catch {
    return '(no log)';
  }
}

/**
 * Whether the server on `port` answers PING and is the process we started (INFO's process_id):
 * in the moment between picking a free port and binding it, someone else may have taken it.
 */
function ours(port: number, pid: number): Promise<boolean> {
  return new Promise((resolveProbe) => {
    let reply = '';
    const socket = connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolveProbe(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('close', () => done(false));
    socket.on('connect', () => socket.write('PING\r\nINFO server\r\n'));
    socket.on('data', (data) => {
      reply += data.toString('latin1');
      const match = /\r\nprocess_id:(\d+)\r\n/.exec(reply);
      if (match) done(reply.startsWith('+PONG') && Number(match[1]) === pid);
    });
  });
}

/** A loopback port that was free a moment ago (never 6379). */
async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolvePort, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
        const address = server.address();
        server.close(() => resolvePort(typeof address === 'object' && address ? address.port : 0));
      });
    });
    if (port !== RESERVED_PORT && port !== 0) return port;
  }
}

/** REDIS_SERVER_BIN, else `redis-server` on PATH (absolute entries only: never ./redis-server). */
export function findRedisServer(): string {
  const fromEnv = process.env.REDIS_SERVER_BIN;
  const candidates = fromEnv
    ? [resolve(fromEnv)]
    : (process.env.PATH ?? '').split(delimiter).filter((dir) => isAbsolute(dir)).map((dir) => join(dir, 'redis-server'));
  for (const file of candidates) {
    try {
      if (statSync(file).isFile()) {
        accessSync(file, constants.X_OK);
        return file;
      }
    } catch {
      // not this one
    }
  }
  throw new Error(
    `${fromEnv ? `REDIS_SERVER_BIN=${fromEnv} is not an executable file` : 'redis-server not found on PATH'}: ` +
      'install it (sudo apt-get install -y redis-server) or set REDIS_SERVER_BIN',
  );
}
