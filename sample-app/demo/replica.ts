import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { exited, track } from './children.js';

const READY_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 5_000;

export interface ReplicaSpec {
  /** The compiled sample app's main.js. */
  mainFile: string;
  id: string;
  /** Configuration (REDIS_URLS, STORE_URL, ...), on top of this process's environment. */
  env: Record<string, string>;
  /** Where the replica's own output goes, so it does not clutter the report. */
  logFile: string;
}

/**
 * One replica of the sample app as a child process, exactly as it would run in production:
 * `node main.js` configured through its environment. It listens on a port the system picks
 * (PORT=0, no race for a free port) and says which in its log; it is up once /health/live answers.
 */
export class Replica {
  private constructor(
    readonly id: string,
    readonly url: string,
    private readonly child: ChildProcess,
  ) {}

  static async start(spec: ReplicaSpec): Promise<Replica> {
    const log = createWriteStream(spec.logFile);
    const child = spawn(process.execPath, [spec.mainFile], {
      env: { ...process.env, ...spec.env, REPLICA_ID: spec.id, PORT: '0', HOST: '127.0.0.1', NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    track(child);
    child.stdout!.pipe(log);
    child.stderr!.pipe(log);
    const failed = (why: string) => {
      child.kill('SIGKILL');
      return new Error(`replica ${spec.id} ${why}; its log (${spec.logFile}) ends with:\n${tailOf(spec.logFile)}`);
    };
    const url = await Promise.race([
      listeningUrl(child),
      exited(child).then(() => undefined),
      sleep(READY_TIMEOUT_MS, undefined, { ref: false }),
    ]);
    if (!url) throw failed('did not start listening');
    const replica = new Replica(spec.id, url, child);
    if (!(await replica.waitHealthy(Date.now() + READY_TIMEOUT_MS))) throw failed('never answered /health');
    return replica;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** SIGTERM (the app closes: timers stop, locks are released), SIGKILL if it takes too long. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGTERM');
    const timedOut = await Promise.race([exited(this.child).then(() => false), sleep(STOP_GRACE_MS, true)]);
    if (timedOut) {
      this.child.kill('SIGKILL');
      await exited(this.child);
    }
  }

  private async waitHealthy(deadline: number): Promise<boolean> {
    while (Date.now() < deadline && this.child.exitCode === null) {
      const status = await fetch(`${this.url}/health/live`).then((response) => response.status, () => 0);
      if (status === 200) return true;
      await sleep(100);
    }
    return false;
  }
}

/** Finds "<id> listening on http://..." in the replica's output. */
function listeningUrl(child: ChildProcess): Promise<string> {
  return new Promise((resolve) => {
    let seen = '';
    const onData = (data: Buffer) => {
      seen = (seen + data.toString('utf8')).slice(-4_000);
      const match = /listening on (http:\/\/[\w.:[\]-]+)/.exec(seen);
      if (match) {
        child.stdout!.off('data', onData);
        resolve(match[1]!);
      }
    };
    child.stdout!.on('data', onData);
  });
}

function tailOf(file: string): string {
  try {
    return readFileSync(file, 'utf8').slice(-1_500);
  } catch {
    return '(no log)';
  }
}
