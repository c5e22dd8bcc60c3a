import type { HistoryEvent } from './history.js';
import type { StoreReply, StoreRequest } from './fenced-store.js';

/**
 * What the test process and its worker processes say to each other over the IPC channel
 * (`serialization: 'advanced'`, so bigints and -Infinity cross as they are).
 */

/** The engine options a worker may be given: the JSON-safe part of RedlockOptions. */
export interface EngineSettings {
  restartQuarantineMs?: number | false;
  nodeTimeoutMs?: number;
  fenceTimeFloor?: boolean;
  driftFactor?: number;
  retryDelayMs?: number;
  retryJitterMs?: number;
  wakeups?: boolean;
  /** 'node-redlock': lock keys under the bare resource name, as node-redlock stores them (issue 31). */
  keyFormat?: 'prefixed' | 'node-redlock';
}

/**
 * A worker process on node-redlock's API instead of the engine's (redlock-api-worker.ts): the
 * `redlock` package itself (npm, 5.0.0-beta.2), or this package's `nestjs-redlock/node-redlock`
 * entry point (`entry`), whose engine takes `WorkerConfig.engine` as its options (the fourth
 * argument: the compatible key format unless told otherwise).
 */
export interface RedlockApiConfig {
  library: 'redlock' | 'entry';
  /** node-redlock's settings: rounds after the first, and the pause between rounds (ms). */
  retryCount: number;
  retryDelay: number;
  retryJitter: number;
  /** Share of cycles that extend the lock once (ttl: the cycle's) between read and write. */
  extendShare: number;
}

/** A whole Redis Cluster as one voter: the nodes its ioredis `Cluster` client is given to find it. */
export interface ClusterVoterConfig {
  cluster: { host: string; port: number }[];
}

export interface WorkerConfig {
  /** Label of this process in the history. */
  proc: string;
  /** One URL per master, in fleet order (direct, or through a proxy). */
  urls: string[];
  /**
   * Instead of `urls`: one voter each, a URL, ioredis options (a Sentinel-managed master's
   * `sentinels` and `name`), or a whole Redis Cluster (ClusterVoterConfig).
   */
  voters?: (string | { sentinels: { host: string; port: number }[]; name: string } | ClusterVoterConfig)[];
  /** Async workers in this process. */
  workers: number;
  /** Worker i locks resources[i % length]. */
  resources: string[];
  /**
   * loop: acquire, read, (hold), (extend), write, release, again.
   * stall: like loop, but blocks its own event loop for stallMs while holding, then writes late.
   * probe: tryAcquire on a fresh resource each time, for timing; no store.
   * herd: one loop cycle per worker at each `go` instant the test sends.
   */
  mode: 'loop' | 'stall' | 'probe' | 'herd';
  /** Each cycle picks one of these at random. */
  ttlMs: number[];
  engine: EngineSettings;
  /** One engine (with its own connections) per async worker instead of one per process. */
  separateEngines?: boolean;
  /** One round per attempt (tryAcquire) with the worker's own jittered back-off. */
  single?: boolean;
  /**
   * Readers and permits instead of the lock: with `limit`, every acquire is a permit of a
   * semaphore of that limit (taking one of `permits` at random, when given: weighted permits);
   * with `readShare`, a reader with that probability, else a writer.
   * Readers and permits hold for a while without touching the store (they share the resource);
   * writers read-modify-write it as the lock does.
   */
  shared?: { limit?: number; permits?: readonly number[]; readShare?: number };
  waitTimeoutMs?: number;
  /** Upper bound of a random time spent inside the lock between read and write. */
  holdMs?: number;
  /** Upper bound of a random pause between cycles. */
  pauseMs?: number;
  /** Extend the lock once per cycle, before the write. */
  extend?: boolean;
  /**
   * Instead: extend 1 to `extendsPerCycle` times per cycle before the write, each time with a ttl
   * picked from this list (shorter or longer than what is left), working holdMs between them.
   */
  extendTtls?: number[];
  /** Default 3. */
  extendsPerCycle?: number;
  /** Write the unfenced counter only with at least this much validity left (default max(ttl/4, 100)). */
  writeMarginMs?: number;
  /** Before one operation per cycle, have the test lose that operation's reply on one master. */
  lossyReplies?: boolean;
  /** stall mode: how long to block the event loop while holding. */
  stallMs?: number;
  /**
   * loop mode: this share of cycles hold the lock through `using`, and start inside it a task
   * that outlives it and takes the same lock again after the outer call released it (see
   * reentryCycle in worker.ts).
   */
  detachedReentry?: number;
  /** Run redlock-api-worker.ts (node-redlock's API) instead of worker.ts; its loops are `loop` mode's. */
  redlockApi?: RedlockApiConfig;
}

export interface WorkerSummary {
  proc: string;
  cycles: number;
  acquireFailures: number;
}

export type RequestKind = 'store' | 'lose-reply' | 'restore';

export interface LoseReplyRequest {
  master: number;
  op: 'acquire' | 'extend' | 'release';
}

export type ChildMessage =
  | { type: 'ready' }
  | { type: 'events'; events: HistoryEvent[] }
  | { type: 'request'; id: number; kind: 'store'; body: StoreRequest }
  | { type: 'request'; id: number; kind: 'lose-reply' | 'restore'; body: LoseReplyRequest }
  | { type: 'herd-done'; episode: number }
  | { type: 'done'; summary: WorkerSummary }
  | { type: 'fatal'; error: string };

export type ParentMessage =
  | { type: 'reply'; id: number; body: StoreReply | null }
  | { type: 'go'; at: bigint; episode: number }
  | { type: 'stop' };
