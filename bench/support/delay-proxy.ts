import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const SOURCE = fileURLToPath(new URL('./delay-proxy.c', import.meta.url));
const CLOCK_TICKS_PER_S = 100;

/**
 * bench/support/delay-proxy.c, built on first use (cc, cached in the temp dir by the source's
 * hash), as one process for every target: `ports[i]` forwards to `targetUrls[i]` with the
 * one-way delay last set by setRttMs (half the round trip each way, order kept).
 */
export class DelayProxy {
  readonly #child: ChildProcess;
  readonly #lines: Interface;
  readonly #replies: { resolve: (line: string) => void; reject: (error: Error) => void }[] = [];
  readonly urls: string[];

  private constructor(child: ChildProcess, lines: Interface, ports: number[]) {
    this.#child = child;
    this.#lines = lines;
    this.urls = ports.map((port) => `redis://127.0.0.1:${port}`);
    lines.on('line', (line) => this.#replies.shift()?.resolve(line));
    // A proxy that died answers nothing more: fail whoever waits instead of hanging the run.
    child.once('exit', (code, signal) => {
      for (const reply of this.#replies.splice(0)) reply.reject(new Error(`delay proxy exited with ${signal ?? code}`));
    });
  }

  static async start(targetUrls: readonly string[]): Promise<DelayProxy> {
    const binary = build();
    const ports = targetUrls.map((url) => new URL(url).port);
    const child = spawn(binary, ports, { stdio: ['pipe', 'pipe', 'inherit'] });
    child.stdin!.on('error', () => {}); // a proxy that died: its exit fails what waits (below)
    const lines = createInterface({ input: child.stdout! });
    const first = await new Promise<string>((resolve, reject) => {
      lines.once('line', resolve);
      child.once('exit', (code) => reject(new Error(`delay proxy exited with ${code} before listening`)));
    });
    if (!first.startsWith('ports ')) throw new Error(`delay proxy said "${first}"`);
    return new DelayProxy(child, lines, first.slice(6).split(' ').map(Number));
  }

  get pid(): number {
    return this.#child.pid!;
  }

  /** Every chunk then waits rttMs / 2 on its way, each way. */
  async setRttMs(rttMs: number): Promise<void> {
    const reply = await this.#ask(`delay ${Math.round((rttMs / 2) * 1000)}`);
    if (reply !== 'ok') throw new Error(`delay proxy said "${reply}"`);
  }

  /**
   * Since the start: chunks (TCP reads) and bytes forwarded; of the delayed chunks, how many and
   * how late on average they left (µs after their due time); how late the timer wakes (µs); the
   * scheduling priority it runs at.
   */
  async stats(): Promise<ProxyStats> {
    const fields = (await this.#ask('stats')).split(' ');
    const [chunks, bytes, delayed, latenessNs, wakeNs] = fields.slice(1, 6).map(Number) as [number, number, number, number, number];
    const scheduling = fields[6] as ProxyStats['scheduling'];
    return { chunks, bytes, delayed, meanLatenessUs: delayed ? latenessNs / delayed / 1000 : 0, wakeLatenessUs: wakeNs / 1000, scheduling };
  }

  /** The proxy's CPU time so far (user + system), in seconds, from /proc. */
  cpuSeconds(): number {
    const stat = readFileSync(`/proc/${this.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S; // utime, stime
  }

  close(): void {
    this.#lines.close();
    this.#child.stdin!.end(); // end of stdin ends the proxy
    this.#child.kill();
  }

  #ask(command: string): Promise<string> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return Promise.reject(new Error('delay proxy has exited'));
    return new Promise((resolve, reject) => {
      this.#replies.push({ resolve, reject });
      this.#child.stdin!.write(`${command}\n`);
    });
  }
}

export interface ProxyStats {
  chunks: number;
  bytes: number;
  delayed: number;
  meanLatenessUs: number;
  wakeLatenessUs: number;
  /** How the proxy got itself scheduled: a higher nice level (the default), real-time (asked for), or neither. */
  scheduling: 'fifo' | 'nice' | 'normal';
}

function build(): string {
  const source = readFileSync(SOURCE);
  const binary = join(tmpdir(), `nestjs-redlock-delay-proxy-${createHash('sha256').update(source).digest('hex').slice(0, 12)}`);
  if (!existsSync(binary)) execFileSync('cc', ['-O2', '-o', binary, SOURCE], { stdio: 'inherit' });
  return binary;
}
