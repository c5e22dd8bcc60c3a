import { fork, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { registry } from '../../support/process-cleanup.js';
import { checkHistory, summarize, VIOLATION_KINDS, type CheckOptions, type CheckResult, type ViolationKind } from './checker.js';
import { FencedStore } from './fenced-store.js';
import { History, now, type HistoryEvent } from './history.js';
import type { ChildMessage, LoseReplyRequest, ParentMessage, WorkerConfig, WorkerSummary } from './protocol.js';
import { WakeForger } from './wake-forger.js';

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));
/** The worker on node-redlock's API (the `redlock` package, or this package's compatible entry point). */
const REDLOCK_API_WORKER = fileURLToPath(new URL('./redlock-api-worker.ts', import.meta.url));
/** Compiles the worker's TypeScript on load, the way vitest compiles the tests. */
const LOADER = new URL('../../support/ts-loader/register.mjs', import.meta.url).href;

// ---------------------------------------------------------------- short and long runs

/** `SAFETY_MINUTES=N`: every scenario runs N minutes (the long run behind `npm run test:safety`). */
export const SAFETY_MINUTES = Number(process.env['SAFETY_MINUTES'] ?? 0) || 0;
export const LONG_RUN = SAFETY_MINUTES > 0;

/** How long a scenario keeps injecting faults: `shortMs` in CI, N minutes in the long run. */
export function runFor(shortMs: number): number {
  return LONG_RUN ? SAFETY_MINUTES * 60_000 : shortMs;
}

/** A vitest timeout for a scenario of `shortMs`, with room for setup and teardown. */
export function timeoutFor(shortMs: number): number {
  return runFor(shortMs) + (LONG_RUN ? 300_000 : 60_000);
}

// ---------------------------------------------------------------- worker processes

export class WorkerProcess {
  readonly ready: Promise<void>;
  /** Settles once the process has exited (and been reaped). */
  readonly exited: Promise<void>;
  summary: WorkerSummary | undefined;
  #stderr = '';

  constructor(
    readonly config: WorkerConfig,
    readonly child: ChildProcess,
  ) {
    this.exited = new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    });
    const output = (data: Buffer) => {
      this.#stderr = (this.#stderr + data.toString('utf8')).slice(-4_000);
    };
    child.stderr?.on('data', output);
    child.stdout?.on('data', output);
    this.ready = new Promise((resolve, reject) => {
      child.on('message', (message: ChildMessage) => {
        if (message.type === 'ready') resolve();
      });
      void this.exited.then(() => reject(new Error(`worker ${config.proc} exited before it was ready:\n${this.output}`)));
    });
    this.ready.catch(() => {});
  }

  get proc(): string {
    return this.config.proc;
  }

  /** What the process printed (its last few KB): for failure messages. */
  get output(): string {
    return this.#stderr;
  }

  send(message: ParentMessage): void {
    if (this.child.connected) this.child.send(message);
  }

  /** Asks the workers to finish their current cycle and leave; kills the process if it does not. */
  async stop(graceMs = 20_000): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.send({ type: 'stop' });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), graceMs)));
    const timedOut = await Promise.race([this.exited.then(() => false), late]);
    clearTimeout(timer);
    if (timedOut) {
      this.kill();
      await this.exited;
      throw new Error(`worker ${this.proc} did not stop within ${graceMs} ms:\n${this.output}`);
    }
  }

  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

// ---------------------------------------------------------------- one scenario's run

export interface Expectation {
  readonly what: string;
  readonly ok: boolean;
  readonly detail?: string;
}

export interface ScenarioSpec {
  readonly id: string;
  readonly title: string;
  /** 'unsafe' only for the control, which must be caught by the checker. */
  readonly expected: 'safe' | 'unsafe';
  /** One line on what is done to the system, for docs/SAFETY.md. */
  readonly method: string;
}

export interface ScenarioResult extends ScenarioSpec {
  readonly durationMs: number;
  readonly holds: number;
  /** Of the holds, how many a release granted (server-side hand-off). */
  readonly handedOff: number;
  /** Acquires by tasks that outlived the call they started in (see reentryCycle in worker.ts). */
  readonly detachedReentries: number;
  /** Wake-ups a forger published for live queue entries, when the scenario had one (WakeForger). */
  readonly forged?: { readonly grants: number; readonly wakes: number };
  readonly acquireFailures: number;
  readonly faults: number;
  readonly violations: number;
  readonly counts: Record<ViolationKind, number>;
  readonly expectations: readonly Expectation[];
  /** Whether the checker's verdict and every expectation came out as they should. */
  readonly asExpected: boolean;
  readonly examples: readonly string[];
  /** Where the history was saved when something was not as expected. */
  readonly historyFile?: string;
}

/**
 * The test-side half of a scenario: the history, the fenced store every worker process shares,
 * the worker processes, and the faults. Requests from workers are served from here.
 */
export class SafetyRun {
  readonly history = new History();
  readonly store = new FencedStore(this.history);
  readonly workers: WorkerProcess[] = [];
  readonly expectations: Expectation[] = [];
  /** Worker processes that crashed or reported a fatal error. */
  readonly errors: string[] = [];
  readonly startedAt = now();
  faults = 0;
  /** Serves a lossy worker's 'lose-reply' / 'restore' requests (the dropped-replies scenario). */
  onLoseReply: ((worker: WorkerProcess, request: LoseReplyRequest, kind: 'lose-reply' | 'restore') => void | Promise<void>) | undefined;
  /** Called when a worker process reports that its herd episode is done. */
  onHerdDone: ((worker: WorkerProcess, episode: number) => void) | undefined;
  readonly #listeners = new Set<() => void>();
  /** Every successful acquisition as it arrives (time, process): for cheap progress checks. */
  readonly #holds: { t: bigint; proc: string; fenced: boolean }[] = [];
  #finalRecorded = false;
  #forger: WakeForger | undefined;

  constructor(readonly spec: ScenarioSpec) {}

  /**
   * From now on a client of these masters forges wake-ups and hand-off grants for every live queue
   * entry (WakeForger); finish() expects it to have forged some, while the checker finds nothing.
   */
  forgeWakeups(urls: readonly string[]): void {
    this.#forger = new WakeForger(urls);
  }

  /** Starts a worker process and resolves once its engines are connected. */
  async spawn(config: WorkerConfig): Promise<WorkerProcess> {
    const env = { ...process.env };
    delete env['NODE_OPTIONS']; // the test runner's own hooks must not leak into the workers
    const child = fork(config.redlockApi ? REDLOCK_API_WORKER : WORKER, [JSON.stringify(config)], {
      execArgv: ['--import', LOADER],
      serialization: 'advanced',
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      env,
    });
    registry.children.add(child);
    const worker = new WorkerProcess(config, child);
    void worker.exited.then(() => {
      registry.children.delete(child);
      if (child.exitCode !== 0 && child.signalCode !== 'SIGKILL') {
        this.errors.push(`worker ${config.proc} exited with ${child.exitCode ?? child.signalCode}:\n${worker.output}`);
      }
      this.#notify();
    });
    child.on('message', (message: ChildMessage) => void this.#onMessage(worker, message));
    this.workers.push(worker);
    await worker.ready;
    return worker;
  }

  async #onMessage(worker: WorkerProcess, message: ChildMessage): Promise<void> {
    switch (message.type) {
      case 'events':
        this.history.recordAll(message.events);
        this.noteHolds(message.events);
        this.#notify();
        return;
      case 'request':
        if (message.kind === 'store') {
          worker.send({ type: 'reply', id: message.id, body: this.store.apply(message.body) });
        } else {
          await this.onLoseReply?.(worker, message.body, message.kind);
          worker.send({ type: 'reply', id: message.id, body: null });
        }
        return;
      case 'herd-done':
        this.onHerdDone?.(worker, message.episode);
        this.#notify();
        return;
      case 'done':
        worker.summary = message.summary;
        return;
      case 'fatal':
        this.errors.push(`worker ${worker.proc} failed: ${message.error}`);
        return;
      default:
    }
  }

  /** Records an injected fault (the history shows when; the report counts them). */
  fault(note: string, at: bigint = now()): void {
    this.faults++;
    this.history.record({ proc: 'fault', worker: 0, op: 'fault', phase: 'ok', t: at, note });
    this.#notify();
  }

  expect(what: string, ok: boolean, detail?: string): void {
    this.expectations.push({ what, ok, ...(detail === undefined ? {} : { detail }) });
  }

  /**
   * Resolves true as soon as `condition` holds, re-evaluated whenever workers report events,
   * or false after `timeoutMs`.
   */
  async until(condition: () => boolean, timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    while (!condition()) {
      const left = deadline - performance.now();
      if (left <= 0) return false;
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.#listeners.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, left);
        this.#listeners.add(wake);
      });
    }
    return true;
  }

  /** Tells the progress counter about events recorded outside a worker process (a LocalHolder). */
  noteHolds(events: readonly HistoryEvent[]): void {
    for (const e of events) if (e.op === 'acquire' && e.phase === 'ok') this.#holds.push({ t: e.t, proc: e.proc, fenced: e.fence !== undefined });
  }

  /**
   * Successful acquisitions at or after `since` (by the processes `proc` accepts), from the
   * newest back: cheap however long the history. Events of one process arrive in order; batches
   * of different processes interleave, and a process that blocked its own loop sends late, so the
   * scan goes on a generous 10 s past `since` before it concludes nothing older can follow.
   * `fencedOnly`: count only locks with a fencing token.
   */
  holdsSince(since: bigint, proc: string | ((proc: string) => boolean) = () => true, fencedOnly = false): number {
    const accepts = typeof proc === 'string' ? (p: string) => p === proc : proc;
    const horizon = since - 10_000_000_000n;
    let count = 0;
    for (let i = this.#holds.length - 1; i >= 0; i--) {
      const hold = this.#holds[i]!;
      if (hold.t < horizon) break;
      if (hold.t >= since && accepts(hold.proc) && (hold.fenced || !fencedOnly)) count++;
    }
    return count;
  }

  /** When the first successful acquisition at or after `since` happened (ms after `since`), if one did. */
  firstHoldAfter(since: bigint, proc: (proc: string) => boolean = () => true): number | undefined {
    let first: bigint | undefined;
    for (const hold of this.#holds) if (hold.t >= since && accepts(hold, proc) && (first === undefined || hold.t < first)) first = hold.t;
    return first === undefined ? undefined : Number(first - since) / 1e6;
  }

  #notify(): void {
    for (const wake of [...this.#listeners]) wake();
  }

  /** Stops every worker process (each finishes its current cycle first). */
  async stopWorkers(): Promise<void> {
    const results = await Promise.allSettled(this.workers.map((worker) => worker.stop()));
    for (const result of results) if (result.status === 'rejected') this.errors.push(String(result.reason));
  }

  check(options?: CheckOptions): CheckResult {
    if (!this.#finalRecorded) {
      this.#finalRecorded = true;
      this.store.recordFinal();
    }
    return checkHistory(this.history.events(), options);
  }

  /** Stops workers, checks the history, and writes the result where the long run collects it. */
  async finish(options?: CheckOptions): Promise<ScenarioResult> {
    await this.stopWorkers();
    const forger = this.#forger;
    if (forger) {
      await forger.stop();
      this.expect(
        `a forger published wake-ups for live queue entries (${forger.grants} hand-off grants, ${forger.wakes} plain)`,
        forger.grants + forger.wakes > 0,
      );
    }
    const durationMs = Number(now() - this.startedAt) / 1e6;
    const check = this.check(options);
    const verdictOk = this.spec.expected === 'safe' ? check.ok : !check.ok;
    this.expect(
      this.spec.expected === 'safe' ? 'the checker finds no violation' : 'the checker records the run as unsafe',
      verdictOk,
      summarize(check),
    );
    this.expect('no worker process failed', this.errors.length === 0, this.errors.join('\n').slice(0, 4_000));
    const asExpected = this.expectations.every((e) => e.ok);
    let historyFile: string | undefined;
    if (!asExpected || process.env['SAFETY_DUMP']) {
      const dir = join(tmpdir(), 'redlock-safety');
      mkdirSync(dir, { recursive: true });
      historyFile = join(dir, `${this.spec.id}-${Date.now()}.jsonl`);
      this.history.writeJsonl(historyFile);
    }
    const result: ScenarioResult = {
      ...this.spec,
      durationMs,
      holds: check.stats.holds,
      handedOff: this.history.events().filter((e) => e.op === 'acquire' && e.phase === 'ok' && e.handedOff).length,
      detachedReentries: this.history.events().filter((e) => e.op === 'acquire' && e.phase === 'invoke' && e.note === 'detached reentry').length,
      ...(forger ? { forged: { grants: forger.grants, wakes: forger.wakes } } : {}),
      acquireFailures: check.stats.acquireFailures,
      faults: this.faults,
      violations: check.violations.length,
      counts: check.counts,
      expectations: this.expectations,
      asExpected,
      examples: check.violations.slice(0, 3).map((v) => `[${v.kind}] ${v.message}`),
      ...(historyFile ? { historyFile } : {}),
    };
    writeResult(result);
    // One line per scenario in the test output: what was exercised, not only that it passed.
    console.log(
      `[safety] ${result.id}: ${result.holds} holds (${result.handedOff} by hand-off), ${result.detachedReentries} detached re-entries, ${result.acquireFailures} failed acquires, ${result.faults} faults, ` +
        `${result.violations} violations${result.violations ? ` (${summarize(check).split('\n')[0]})` : ''}, ` +
        `${Math.round(durationMs / 100) / 10} s: ${asExpected ? 'as expected' : 'NOT AS EXPECTED'}` +
        (process.env['SAFETY_VERBOSE'] ? `\n${this.expectations.map((e) => `  ${e.ok ? 'ok ' : 'NO '} ${e.what}${e.detail ? ` -- ${e.detail}` : ''}`).join('\n')}` : ''),
    );
    return result;
  }

  /** Kills whatever is still running. Safe to call twice, and after finish(). */
  async dispose(): Promise<void> {
    await this.#forger?.stop();
    for (const worker of this.workers) worker.kill();
    await Promise.all(this.workers.map((worker) => worker.exited));
  }
}

/** Every expectation that failed, with its detail: the message a failed test shows. */
export function failures(result: ScenarioResult): string {
  const failed = result.expectations.filter((e) => !e.ok).map((e) => `- ${e.what}${e.detail ? `\n    ${e.detail.replaceAll('\n', '\n    ')}` : ''}`);
  if (failed.length === 0) return '';
  return `${result.id}: not as expected\n${failed.join('\n')}${result.historyFile ? `\nhistory: ${result.historyFile}` : ''}`;
}

function accepts(hold: { proc: string }, proc: (proc: string) => boolean): boolean {
  return proc(hold.proc);
}

/** "median 12 ms, max 40 ms" for a list of durations. */
export function spread(values: readonly number[]): string {
  if (values.length === 0) return 'none';
  const sorted = [...values].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)]!;
  return `median ${Math.round(median)} ms, max ${Math.round(sorted[sorted.length - 1]!)} ms (${values.length})`;
}

function writeResult(result: ScenarioResult): void {
  const dir = process.env['SAFETY_RESULTS_DIR'];
  if (!dir) return;
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${result.id}.json`), JSON.stringify(result, null, 2));
}

export { VIOLATION_KINDS };
