import type { INestApplication, ModuleMetadata } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { FRESH_FLEET, PATIENT } from '../support/masters.js';
import type { RedisFleet } from '../support/redis-fleet.js';

/**
 * Shared pieces of the Nest e2e tests: apps and direct Redis clients that are always closed
 * (closeAll() in afterEach), deferreds for "the handler is running now", and a probe that
 * records how many callers were inside a critical section at once.
 */

const apps = new Set<INestApplication>();
const clients = new Set<Redis>();

/**
 * Compiles and initialises a Nest app; with `listen`, on a real port of 127.0.0.1 (concurrent
 * supertest requests need one server that is already listening).
 */
export async function createApp(metadata: ModuleMetadata, { listen = false } = {}): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule(metadata).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  apps.add(app);
  if (listen) await app.listen(0, '127.0.0.1');
  else await app.init();
  return app;
}

/** Base URL of an app created with `listen: true`, for supertest. */
export function urlOf(app: INestApplication): string {
  const address = (app.getHttpServer() as Server).address() as AddressInfo;
  return `http://127.0.0.1:${address.port}`;
}

/** Closes an app created by createApp (idempotent with closeAll). */
export async function closeApp(app: INestApplication): Promise<void> {
  if (!apps.delete(app)) return;
  await app.close();
}

/** One plain client per master, to look at the keys the library left behind. */
export function directClients(fleet: RedisFleet): Redis[] {
  return fleet.urls().map((url) => {
    const client = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: false });
    client.on('error', () => {});
    clients.add(client);
    return client;
  });
}

/** How many masters hold `key` right now. */
export async function mastersHolding(masters: readonly Redis[], key: string): Promise<number> {
  const found = await Promise.all(masters.map((client) => client.exists(key).catch(() => 0)));
  return found.reduce((sum, n) => sum + n, 0);
}

/** Closes every app and client still open: call in afterEach so a failed test leaks nothing. */
export async function closeAll(): Promise<void> {
  const pending = [...apps];
  apps.clear();
  await Promise.allSettled(pending.map((app) => app.close()));
  for (const client of clients) client.disconnect();
  clients.clear();
}

export interface Deferred<T = void> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Counts callers inside a critical section; `max` is the most ever inside at once. */
export class ConcurrencyProbe {
  active = 0;
  max = 0;
  entries = 0;

  /** Enters, does `workMs` of (simulated) work, leaves. */
  async section(workMs = 5): Promise<void> {
    this.active++;
    this.entries++;
    this.max = Math.max(this.max, this.active);
    try {
      await new Promise((resolve) => setTimeout(resolve, workMs));
    } finally {
      this.active--;
    }
  }
}

/**
 * Module options for a test fleet. The fleet's servers have just started, and the engine would
 * rightly refuse their votes until they are older than the longest ttl (restart quarantine):
 * fresh throw-away servers are the documented case for turning that off. The Nest tests fault
 * masters by killing them, never by slowing them, so a slow reply on a loaded machine is no fault
 * (PATIENT): CI under double load once answered 503 for a lock held elsewhere (423 expected).
 */
export function fleetOptions(fleet: RedisFleet) {
  return { nodes: fleet.urls(), ...FRESH_FLEET, ...PATIENT, retryDelayMs: 10, retryJitterMs: 10 };
}
