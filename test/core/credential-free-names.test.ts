import 'reflect-metadata';
import { HealthIndicatorService } from '@nestjs/terminus';
import { Cluster, Redis, type ClusterNode, type ClusterOptions } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { QuorumUnreachableError, Redlock, type DuplicateMaster } from '../../lib/index.js';
import { RedlockTelemetry } from '../../lib/opentelemetry/index.js';
import { RedlockHealthIndicator } from '../../lib/terminus/index.js';
import { freePort } from '../support/free-port.js';
import { FRESH_FLEET, LOCK_CLIENT_OPTIONS } from '../support/masters.js';
import { OtelSdk } from '../opentelemetry/otel-sdk.js';

// Masters are named by host and port only, whatever form their address and credentials were
// given in: every form ioredis accepts for a Redis Cluster's startup nodes and for a plain
// master, each on a port nobody listens on, so that every voter fails and is named in errors,
// health, warnings and telemetry.

const USER = 'user-in-address-7c1d';
const SECRET = 'secret-in-address-3f9a';
const SECRETS = [USER, SECRET, encodeURIComponent(SECRET)];

const opened: { disconnect(): void }[] = [];
let sdk: OtelSdk | undefined;

afterEach(async () => {
  for (const client of opened.splice(0)) client.disconnect();
  await sdk?.shutdown();
  sdk = undefined;
});

/** A startup node as ioredis takes it, with credentials wherever that form can carry them. */
const CLUSTER_FORMS: ((port: number) => { node: ClusterNode; options?: ClusterOptions })[] = [
  (port) => ({ node: `redis://${USER}:${SECRET}@127.0.0.1:${port}` }),
  (port) => ({ node: `redis://:${SECRET}@127.0.0.1:${port}` }),
  (port) => ({ node: `redis://127.0.0.1:${port}?password=${SECRET}` }),
  (port) => ({ node: `redis://127.0.0.1:${port}/0?username=${USER}&password=${SECRET}` }),
  (port) => ({ node: `rediss://${USER}:${SECRET}@127.0.0.1:${port}` }),
  (port) => ({ node: `127.0.0.1:${port}?password=${SECRET}` }),
  (port) => ({ node: `//${USER}:${SECRET}@127.0.0.1:${port}` }),
  (port) => ({ node: { host: '127.0.0.1', port, username: USER, password: SECRET } as ClusterNode }),
  (port) => ({ node: { host: '127.0.0.1', port: String(port) } as unknown as ClusterNode, options: { redisOptions: { username: USER, password: SECRET } } }),
  (port) => ({ node: port }),
  (port) => ({ node: String(port) }),
];

/** A plain master as ioredis takes it, with credentials. */
const PLAIN_FORMS: ((port: number) => Redis)[] = [
  (port) => new Redis(`redis://${USER}:${SECRET}@127.0.0.1:${port}`, { ...LOCK_CLIENT_OPTIONS, lazyConnect: true }),
  (port) => new Redis(`redis://127.0.0.1:${port}?password=${SECRET}`, { ...LOCK_CLIENT_OPTIONS, lazyConnect: true }),
  (port) => new Redis(port, '127.0.0.1', { ...LOCK_CLIENT_OPTIONS, username: USER, password: SECRET, lazyConnect: true }),
  (port) => new Redis({ ...LOCK_CLIENT_OPTIONS, host: '127.0.0.1', port, username: USER, password: SECRET, lazyConnect: true }),
];

function clusterClient(node: ClusterNode, options: ClusterOptions = {}): Cluster {
  // No offline queue: a command to a cluster that cannot be reached fails at once.
  const client = new Cluster([node], { enableOfflineQueue: false, lazyConnect: true, redisOptions: LOCK_CLIENT_OPTIONS, ...options });
  client.on('error', () => {});
  opened.push(client);
  return client;
}

function plainClient(make: (port: number) => Redis, port: number): Redis {
  const client = make(port);
  client.on('error', () => {});
  opened.push(client);
  return client;
}

describe('a voter given with credentials', () => {
  it('is named by host and port, whatever the form of a Cluster startup node', async () => {
    for (const form of CLUSTER_FORMS) {
      const port = await freePort();
      const { node, options } = form(port);
      const redlock = new Redlock(clusterClient(node, options) as unknown as Redis, { ...FRESH_FLEET, logger: { warn: () => {} } });
      expect({ form: String(CLUSTER_FORMS.indexOf(form)), ...redlock.nodes[0]!.address }).toEqual({
        form: String(CLUSTER_FORMS.indexOf(form)),
        name: `cluster:127.0.0.1:${port}`,
        address: '127.0.0.1',
        port,
      });
    }
  });

  it('never appears in errors, health, warnings, duplicate events or metric attributes', async () => {
    const ports = await Promise.all([...CLUSTER_FORMS, ...PLAIN_FORMS].map(() => freePort()));
    const clients = [
      ...CLUSTER_FORMS.map((form, index) => {
        const { node, options } = form(ports[index]!);
        return clusterClient(node, options) as unknown as Redis;
      }),
      ...PLAIN_FORMS.map((make, index) => plainClient(make, ports[CLUSTER_FORMS.length + index]!)),
    ];
    sdk = new OtelSdk();
    const instrumentation = new RedlockTelemetry({ meterProvider: sdk.meterProvider, tracerProvider: sdk.tracerProvider });
    const warnings: string[] = [];
    const redlock = new Redlock(clients, { ...FRESH_FLEET, instrumentation, nodeTimeoutMs: 500, logger: { warn: (message) => warnings.push(message) } });
    const duplicates: DuplicateMaster[] = [];
    redlock.on('duplicate', (duplicate: DuplicateMaster) => duplicates.push(duplicate));

    const error = await redlock.acquire('anything', 5_000, { retryCount: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnreachableError);
    const health = await redlock.checkMasters(500);
    const indicator = await new RedlockHealthIndicator(redlock, new HealthIndicatorService()).isHealthy();
    const attributes = (await sdk.collect()).flatMap((metric) => metric.dataPoints.map((point) => point.attributes));
    const addresses = attributes.flatMap((attribute) => (attribute['server.address'] === undefined ? [] : [attribute['server.address']]));
    // Every master failed, and telemetry named each by host only.
    expect(new Set(addresses)).toEqual(new Set(['127.0.0.1']));

    const names = redlock.nodes.map((node) => node.name);
    expect(names).toEqual(ports.map((port, index) => (index < CLUSTER_FORMS.length ? `cluster:127.0.0.1:${port}` : `127.0.0.1:${port}`)));
    const said = [
      ...names,
      (error as Error).message,
      JSON.stringify(error),
      JSON.stringify(health),
      JSON.stringify(indicator),
      JSON.stringify(attributes),
      JSON.stringify(duplicates),
      ...warnings,
    ].join('\n');
    for (const secret of SECRETS) expect(said).not.toContain(secret);
    redlock.close();
  });
});
