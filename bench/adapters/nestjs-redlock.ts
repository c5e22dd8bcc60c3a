import type { Redis } from 'ioredis';
import { Redlock, type Lock } from '../../lib/core/index.js';
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
  #redlock: Redlock | undefined;
  #sdk: InstalledOtelSdk | undefined;

  /**
   * With `telemetry`, the OpenTelemetry SDK is installed in the process (bench/support/otel-sdk.ts)
   * and the engine reports to it through `new RedlockTelemetry(telemetry)`.
   */
  constructor({ telemetry }: { telemetry?: RedlockTelemetryOptions } = {}) {
    this.#telemetry = telemetry;
    this.name = telemetry ? 'nestjs-redlock + OpenTelemetry' : 'nestjs-redlock';
    this.settings =
      `waitTimeoutMs ${WAIT_MS}; default retryDelayMs 50 + retryJitterMs 50 (uniform)` +
      (telemetry ? `; instrumentation: new RedlockTelemetry(${JSON.stringify(telemetry)}) over the installed SDK` : '');
  }

  async setup(urls: readonly string[], options: SetupOptions): Promise<void> {
    this.#clients = await connect(urls, options.autoPipelining);
    if (this.#telemetry) this.#sdk = installOtelSdk();
    const instrumentation = this.#telemetry ? new RedlockTelemetry(this.#telemetry) : undefined;
    this.#redlock = new Redlock(this.#clients, { waitTimeoutMs: WAIT_MS, instrumentation });
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
    await this.#sdk?.uninstall();
  }
}
