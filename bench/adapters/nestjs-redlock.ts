import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Redis } from 'ioredis';
import { Redlock, type Lock, type RedlockClient } from '../../lib/core/index.js';
import { connectLockClients } from '../../test/support/lock-clients.js';
import { disconnectAll } from '../../test/support/masters.js';
import { RedlockTelemetry, type RedlockTelemetryOptions } from '../../lib/opentelemetry/index.js';
import { connect, disconnect } from '../support/clients.js';
import { installOtelSdk, type InstalledOtelSdk } from '../support/otel-sdk.js';
import { WAIT_MS, type LockAdapter, type SetupOptions, type SharedShape } from './lock-adapter.js';

export class NestjsRedlockAdapter implements LockAdapter<Lock> {
  readonly name: string;
  readonly packageName = 'nestjs-redlock';
  readonly settings: string;
  readonly #telemetry: RedlockTelemetryOptions | undefined;
  #clients: Redis[] = [];
  /** With `nodeRedis`: the engine's masters are node-redis 5 clients instead. */
  readonly #nodeRedis: boolean;
  #nodeRedisClients: RedlockClient[] = [];
  #redlock: Redlock | undefined;
  #sdk: InstalledOtelSdk | undefined;

  /**
   * With `telemetry`, the OpenTelemetry SDK is installed in the process (bench/support/otel-sdk.ts)
   * and the engine reports to it through `new RedlockTelemetry(telemetry)`.
   */
  readonly #baseDir: string | undefined;

  /**
   * With `baseDir`, the engine is the one in that checkout's lib/ (another commit's), for a
   * comparison side by side in one run.
   */
  constructor({ telemetry, baseDir, nodeRedis = false }: { telemetry?: RedlockTelemetryOptions; baseDir?: string; nodeRedis?: boolean } = {}) {
    this.#telemetry = telemetry;
    this.#baseDir = baseDir;
    this.#nodeRedis = nodeRedis;
    this.name = telemetry
      ? 'nestjs-redlock + OpenTelemetry'
      : baseDir
        ? `nestjs-redlock at ${commitOf(baseDir)} (base)`
        : nodeRedis
          ? 'nestjs-redlock on node-redis 5'
          : 'nestjs-redlock';
    this.settings =
      `waitTimeoutMs ${WAIT_MS}; default retryDelayMs 50 + retryJitterMs 50 (uniform)` +
      (telemetry ? `; instrumentation: new RedlockTelemetry(${JSON.stringify(telemetry)}) over the installed SDK` : '') +
      (nodeRedis ? '; masters are node-redis 5 clients (createClient, disableOfflineQueue; node-redis pipelines the commands of one tick by itself, whatever the scenario asks)' : '');
  }

  async setup(urls: readonly string[], options: SetupOptions): Promise<void> {
    if (this.#nodeRedis) {
      this.#nodeRedisClients = await connectLockClients('node-redis', urls);
      this.#redlock = new Redlock(this.#nodeRedisClients, { waitTimeoutMs: WAIT_MS });
      return;
    }
    this.#clients = await connect(urls, options.autoPipelining);
    if (this.#telemetry) this.#sdk = installOtelSdk();
    const instrumentation = this.#telemetry ? new RedlockTelemetry(this.#telemetry) : undefined;
    const Engine = this.#baseDir ? ((await import(pathToFileURL(join(this.#baseDir, 'lib/core/index.ts')).href)) as { Redlock: typeof Redlock }).Redlock : Redlock;
    this.#redlock = new Engine(this.#clients, { waitTimeoutMs: WAIT_MS, instrumentation });
  }

  acquire(key: string, ttlMs: number): Promise<Lock> {
    return this.#redlock!.acquire(key, ttlMs);
  }

  acquireShared(key: string, ttlMs: number, shape: SharedShape): Promise<Lock> {
    return this.#redlock!.acquire(key, ttlMs, shape);
  }

  async release(lock: Lock): Promise<void> {
    await lock.release();
  }

  async close(): Promise<void> {
    this.#redlock?.close(); // the connections it opened itself (wake-up subscribers)
    disconnect(this.#clients);
    disconnectAll(this.#nodeRedisClients);
    await this.#sdk?.uninstall();
  }
}

function commitOf(dir: string): string {
  try {
    return execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return dir;
  }
}
