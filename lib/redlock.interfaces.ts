import type { ExecutionContext } from '@nestjs/common';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import type { RedlockError } from './core/base/errors.js';
import type { RedlockOptions } from './core/lock/redlock-options.js';
import type { LockMode } from './core/lock/lock-kind.js';
import type { NodeRedisClient } from './core/voters/clients/node-redis-client.js';

/**
 * What a decorated call does when another owner holds the lock: `wait` retries until the
 * lock is free or `waitTimeoutMs` runs out; `fail` gives up after one round with
 * `LockHeldError` (409 over HTTP); `skip` gives up after one round without running the method,
 * which returns `undefined` (a scheduled job that another replica is running already).
 * On a provider's method (a job) `skip` also covers too few masters voting (down, or in restart
 * quarantine after a deploy): the call is skipped and the module's logger says so at WARN once
 * per episode, and once when a lock is taken again, rather than an error per tick. A handler a
 * client waits on (route, message, gateway, resolver) still answers with the transport's error
 * then (503 over HTTP), as `fail` and `wait` methods still get `QuorumUnreachableError`.
 */
export type OnLocked = 'wait' | 'fail' | 'skip';

/** A key function receives the method's arguments and names the resource(s) to lock. */
export type LockKeyFunction = (...args: any[]) => string | readonly string[];

/**
 * The resource(s) `@WithLock` locks: a template (`'order:{0}'`, `'user:{1.user.id}'`, where
 * `{N}` is argument N and `.path` reads a property of it; `{{` and `}}` are literal braces),
 * an array of templates (one lock over several resources), or a function of the arguments.
 */
export type LockKey = string | readonly string[] | LockKeyFunction;

/** How `@WithLock` takes its lock: ttl, wait policy, auto-extension, and the kind of lock. */
export interface WithLockOptions {
  /** Lock ttl in ms. Default: the module's `defaultTtlMs`. */
  ttlMs?: number;
  /** Default: the module's `defaultWait.onLocked`, itself `'wait'` by default. */
  onLocked?: OnLocked;
  /** With `onLocked: 'wait'`, how long to wait. Default: `defaultWait.waitTimeoutMs`, else the engine's `waitTimeoutMs`. */
  waitTimeoutMs?: number;
  /** Keep extending the lock while the method runs. Default true. */
  autoExtend?: boolean;
  /** `'read'`: runs beside other readers, never beside a writer. Default `'write'`: exclusive. */
  mode?: LockMode;
  /** At most this many calls hold the key at once, across every replica (a semaphore). Default 1. */
  limit?: number;
  /** With `limit`: how many of the semaphore's permits one call takes, all or none (a weighted permit). Default 1. */
  permits?: number;
  /**
   * For a scheduled job (`@Cron`, `@Interval` or `@Timeout` of `@nestjs/schedule` on the same
   * method): a run claims its tick across replicas, not only the lock, so a tick runs at most
   * once even when the job ends long before another replica's timer fires for the same tick.
   * A run that finds its tick claimed is skipped, as `onLocked: 'skip'` skips one that finds the
   * lock held (which it implies). What a tick is for each kind of job, and the limits:
   * docs/jobs-and-transports.md, "Once per tick". Default false.
   */
  oncePerTick?: boolean;
}

/** What `@WithLock` records on the method. */
export interface WithLockMetadata {
  readonly key: LockKey;
  readonly options: Readonly<WithLockOptions>;
}

/** The wait policy `@WithLock` methods follow when they do not set their own. */
export interface DefaultWait {
  /** `skip` is not a default: a method skips only where it says so, or calls would vanish unnoticed. */
  onLocked?: Exclude<OnLocked, 'skip'>;
  /** How long a `wait` method waits, in ms. Default: the engine's `waitTimeoutMs`. */
  waitTimeoutMs?: number;
}

/**
 * Replaces the interceptor's mapping of lock acquisition failures on decorated controller
 * handlers (any transport): receives the core error, returns what to throw instead.
 */
export type RedlockErrorMapper = (error: RedlockError, context: ExecutionContext) => unknown;

/**
 * One voter: a `redis://` or `rediss://` URL, ioredis options, or a client you own: an ioredis
 * client (a Redis Cluster client counts as one voter) or a connected node-redis client.
 */
export type RedlockNode = string | RedisOptions | Redis | Cluster | NodeRedisClient;

/** The library the module connects masters given by URL with: `ioredis` (the default) or `node-redis` (the `redis` package, installed by the app). */
export type RedlockClientLibrary = 'ioredis' | 'node-redis';

/**
 * The options of `RedlockModule.forRoot` (or what `forRootAsync`'s factory returns): the Redis
 * masters, the defaults of `@WithLock` and `RedlockService`, and every option of the engine
 * (`RedlockOptions`).
 */
export interface RedlockModuleOptions extends RedlockOptions {
  /**
   * The independent Redis masters (an odd number, typically 3 or 5). Connections made from
   * URLs or options are owned by the module and closed at shutdown; clients you pass are
   * used as they are and never closed.
   */
  nodes: readonly RedlockNode[];
  /**
   * Which library the module connects the masters given as URLs with. Default `'ioredis'`.
   * With `'node-redis'` the app installs `redis` (v4 or v5); ioredis options objects are then
   * refused, and clients passed in are used as they are, whichever library made them.
   */
  client?: RedlockClientLibrary;
  /** Ttl in ms for `@WithLock` and for service calls that omit one. Default 10 000. */
  defaultTtlMs?: number;
  /** Wait policy of `@WithLock` methods that set none. Default `{ onLocked: 'wait' }`. */
  defaultWait?: DefaultWait;
  /**
   * Replaces the default mapping of lock failures on decorated handlers: 409 / 503 / 400 over
   * HTTP, `RpcException`, `WsException` or `GraphQLError` on the other transports.
   */
  errorMapper?: RedlockErrorMapper;
  /** How this replica campaigns in elections (`@WhileLeader`, `LeadershipService`). */
  leadership?: LeadershipOptions;
}

/** How this replica campaigns in elections: the module's `leadership` option. */
export interface LeadershipOptions {
  /**
   * Who this replica is, as other replicas see it when they ask who leads (`LeadershipService.leader`):
   * the pod name, for example. Default: `<hostname>:<pid>`.
   */
  identity?: string;
  /**
   * How long a leader's lease lasts without renewal, in ms: a leader that dies without a word is
   * replaced about this long after its last renewal. Default 10 000.
   */
  leaseMs?: number;
}

/** Implemented by a class given to `forRootAsync({ useClass })` or `useExisting`. */
export interface RedlockOptionsFactory {
  /** The module's options, built from what the class injects. */
  createRedlockOptions(): RedlockModuleOptions | Promise<RedlockModuleOptions>;
}
