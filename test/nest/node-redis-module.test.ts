import 'reflect-metadata';
import { createClient, createCluster } from 'redis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedlockConfigError, RedlockModule, type RedlockModuleOptions, RedlockService } from '../../lib/index.js';
import { RedisConnections } from '../../lib/redis-connections.js';
import { nodeRedisLockClient } from '../support/lock-clients.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { closeAll, createApp, directClients, fleetOptions, mastersHolding } from './nest-helpers.js';

// The module on node-redis: masters given by URL are connected with it when options.client says
// so, node-redis clients the app made are used as they are, and what cannot work is refused at
// bootstrap with RedlockConfigError naming the node.

type NodeRedis = ReturnType<typeof createClient>;

let fleet: RedisFleet;
const mine: NodeRedis[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});
afterEach(async () => {
  await closeAll();
});
afterAll(async () => {
  for (const client of mine) if (client.isOpen) client.destroy();
  await fleet?.stopAll();
});

describe("RedlockModule with client 'node-redis'", () => {
  it('connects the URLs with node-redis, locks with them, and closes them at shutdown', async () => {
    const app = await createApp({ imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), client: 'node-redis' })] });
    const owned = app.get(RedisConnections).owned as unknown as NodeRedis[];
    expect(owned).toHaveLength(3);
    // node-redis's shape: sendCommand and isReady, not ioredis's evalsha and status.
    for (const client of owned) expect({ send: typeof client.sendCommand, ready: client.isReady, evalsha: 'evalsha' in client }).toEqual({ send: 'function', ready: true, evalsha: false });
    const masters = directClients(fleet);
    const service = app.get(RedlockService);
    await service.using('nr-module', async () => {
      expect(await mastersHolding(masters, 'redlock:nr-module')).toBeGreaterThanOrEqual(2);
    });
    await app.close();
    expect(owned.map((client) => client.isOpen)).toEqual([false, false, false]);
  });

  it('boots with a master down, and locks on the majority', async () => {
    await fleet.kill(2);
    try {
      const app = await createApp({ imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), client: 'node-redis' })] });
      const lock = await app.get(RedlockService).acquire('nr-minority-down');
      expect(lock.rounds[0]!.filter((outcome) => outcome.status === 'granted')).toHaveLength(2);
      await lock.release();
    } finally {
      await fleet.start(2);
    }
  });

  it('uses node-redis clients the app made, whatever options.client says, and never closes them', async () => {
    const clients = fleet.urls().map((url) => nodeRedisLockClient(url));
    mine.push(...clients);
    await Promise.all(clients.map((client) => client.connect()));
    const app = await createApp({ imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), nodes: clients })] });
    expect(app.get(RedisConnections).owned).toEqual([]);
    await (await app.get(RedlockService).acquire('nr-given')).release();
    await app.close();
    expect(clients.map((client) => client.isReady)).toEqual([true, true, true]);
  });

  it.each<[string, () => Partial<RedlockModuleOptions>, RegExp]>([
    ['an unknown client library', () => ({ client: 'valkey-glide' as never }), /^RedlockModule: options\.client must be 'ioredis' or 'node-redis' \(got "valkey-glide"\)$/],
    ['ioredis options with node-redis', () => ({ client: 'node-redis', nodes: [{ host: '127.0.0.1', port: fleet.nodes[0]!.port }] }), /options\.nodes\[0\] is an options object, which the module reads as ioredis options/],
    ['a node-redis Cluster client', () => ({ nodes: [...fleet.urls().slice(1), createCluster({ rootNodes: [{ url: 'redis://:pw-of-cluster@127.0.0.1:7000' }] }) as never] }), /options\.nodes\[2\]: a node-redis Cluster client \(createCluster\) is not supported/],
    ['a node-redis client not connected', () => ({ nodes: [createClient({ url: 'redis://:pw-of-client@127.0.0.1:6390' }) as never] }), /options\.nodes\[0\]: a node-redis client must have been opened/],
  ])('refuses %s, naming the option, never a password', async (_name, override, message) => {
    const error = await createApp({ imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), ...override() } as RedlockModuleOptions)] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedlockConfigError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toMatch(/pw-of/);
  });
});
