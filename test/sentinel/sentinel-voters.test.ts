import { setTimeout as sleep } from 'node:timers/promises';
import { Redis, type RedisOptions } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError, QuorumUnreachableError, Redlock } from '../../lib/index.js';
import { freePort } from '../support/free-port.js';
import { connectMasters, disconnectAll, FRESH_FLEET, untilReady } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { SentinelGroup, sentinelClient, untilServes } from '../support/sentinel-group.js';
import { RedisNode } from '../../lib/core/voters/redis-node.js';
import { ReleaseWakeups } from '../../lib/core/waiting/release-wakeups.js';
import { masterClientOf } from '../../lib/core/voters/clients/clients.js';

// Voters given as Sentinel-managed masters (ioredis `sentinels` + `name`): one Sentinel group
// (a master, a replica, one Sentinel) beside two plain masters.

let group: SentinelGroup;
let plain: RedisFleet;
const opened: Redis[] = [];
const silent = { warn: () => {} };

beforeAll(async () => {
  [group, plain] = await Promise.all([SentinelGroup.start({ name: 'voters' }), RedisFleet.start(2)]);
});

afterEach(() => {
  disconnectAll(opened.splice(0));
});

afterAll(async () => {
  await Promise.all([group?.stopAll(), plain?.stopAll()]);
});

/** A client that is never connected (lazyConnect): for what the engine makes of its options. */
function unconnected(options: RedisOptions): Redis {
  const client = new Redis({ lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1, ...options });
  client.on('error', () => {});
  opened.push(client);
  return client;
}

async function engine(): Promise<Redlock> {
  const viaSentinel = sentinelClient(group);
  opened.push(viaSentinel);
  await untilReady(viaSentinel);
  const direct = await connectMasters(plain.urls());
  opened.push(...direct);
  const redlock = new Redlock([viaSentinel, ...direct], { ...FRESH_FLEET, logger: silent, nodeTimeoutMs: 2_000 });
  await redlock.verifyMasters();
  return redlock;
}

describe('Sentinel-managed voters', () => {
  it('never let two of many concurrent clients of two engines inside the same lock', async () => {
    const engines = [await engine(), await engine()];
    let inside = 0;
    let mostInside = 0;
    let cycles = 0;
    await Promise.all(
      engines.flatMap((redlock) =>
        Array.from({ length: 3 }, async () => {
          for (let i = 0; i < 8; i++) {
            await redlock.using(
              'shared',
              2_000,
              async () => {
                inside++;
                mostInside = Math.max(mostInside, inside);
                await sleep(1); // lets the others try to get in
                inside--;
                cycles++;
              },
              { waitTimeoutMs: 30_000 },
            );
          }
        }),
      ),
    );
    expect(mostInside).toBe(1);
    expect(cycles).toBe(2 * 3 * 8);
    // The Sentinel voter holds lock keys on its group's master, like any other voter.
    const lock = await engines[0]!.acquire('where', 5_000);
    await expect.poll(() => group.direct(group.masterIndex).exists('redlock:where')).toBe(1);
    await lock.release();
    for (const redlock of engines) redlock.close();
  });

  it('are named after their group and first Sentinel, the same whichever server is master', async () => {
    const redlock = await engine();
    expect(redlock.nodes[0]!.name).toBe(`sentinel:voters@127.0.0.1:${group.sentinelPorts()[0]}`);
    redlock.close();
  });

  it('never name a credential, in names, errors or warnings', async () => {
    // Nobody listens on these ports: the Sentinel and both plain masters are unreachable.
    const [port, ...dead] = await Promise.all([freePort(), freePort(), freePort()]);
    const secrets = ['master-secret-pw', 'sentinel-secret-pw', 'lock-user'];
    const warnings: string[] = [];
    const client = unconnected({
      sentinels: [{ host: '127.0.0.1', port }],
      name: 'guarded',
      username: 'lock-user',
      password: 'master-secret-pw',
      sentinelPassword: 'sentinel-secret-pw',
      sentinelRetryStrategy: () => 50,
      lazyConnect: false, // it keeps asking the (unreachable) Sentinel where the master is
    });
    const others = dead.map((deadPort) => unconnected({ host: '127.0.0.1', port: deadPort, password: 'master-secret-pw' }));
    const redlock = new Redlock([client, ...others], { ...FRESH_FLEET, logger: { warn: (message) => warnings.push(message) }, nodeTimeoutMs: 500 });
    const error = await redlock.tryAcquire('anything', 5_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnreachableError);
    const health = await redlock.checkMasters(500);
    const said = [redlock.nodes[0]!.name, (error as Error).message, JSON.stringify(error), JSON.stringify(health), ...warnings].join('\n');
    expect(said).toContain(`sentinel:guarded@127.0.0.1:${port}`);
    for (const secret of secrets) expect(said).not.toContain(secret);
    redlock.close();
  });

  it('whose group name no Sentinel monitors are a configuration error at verification, naming the group and the Sentinels', async () => {
    const direct = await connectMasters(plain.urls());
    opened.push(...direct);
    // Without an offline queue the client's commands fail at once ("Stream isn't writeable");
    // with one they would wait for ever for a master the Sentinels will never name.
    for (const enableOfflineQueue of [false, true]) {
      const typo = sentinelClient(group, { name: 'votrs', enableOfflineQueue } as RedisOptions);
      opened.push(typo);
      const redlock = new Redlock([direct[0]!, typo, direct[1]!], { ...FRESH_FLEET, logger: silent });
      const error = await redlock.verifyMasters().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidArgumentError);
      expect((error as InvalidArgumentError).argument).toBe('clients[1].name');
      expect((error as Error).message).toBe(
        `invalid clients[1].name: "votrs" (no Sentinel monitors a master of that name (127.0.0.1:${group.sentinelPorts()[0]} said ` +
          `"No such master with that name"); check the name the Sentinels monitor it under)`,
      );
      redlock.close();
    }
    // The right name passes.
    (await engine()).close();
  });

  it('refuse the same Sentinel-managed master twice, and a client that reaches a replica', () => {
    const at = (port: number) => ({ host: '127.0.0.1', port });
    const a = unconnected({ sentinels: [at(1001), at(1002)], name: 'm' });
    const sameMaster = unconnected({ sentinels: [at(1003), at(1002)], name: 'm' }); // shares a Sentinel
    const otherName = unconnected({ sentinels: [at(1001), at(1002)], name: 'other' });
    const otherSentinels = unconnected({ sentinels: [at(1004)], name: 'm' });
    expect(() => new Redlock([a, sameMaster, otherName], { logger: silent })).toThrow(InvalidArgumentError);
    expect(() => new Redlock([a, sameMaster, otherName], { logger: silent })).toThrow(/clients\[1\].*same address as clients\[0\]/);
    expect(() => new Redlock([a, otherName, otherSentinels], { logger: silent })).not.toThrow();
    const replica = unconnected({ sentinels: [at(1005)], name: 'r', role: 'slave' });
    expect(() => new Redlock([a, otherName, replica], { logger: silent })).toThrow(/clients\[2\]\.role.*replica/);
  });
});

describe('wake-ups of a Sentinel-managed voter', () => {
  it('come from the server its client is connected to, and from the new master after a failover', async () => {
    const client = sentinelClient(group);
    opened.push(client);
    await untilReady(client);
    const wakeups = new ReleaseWakeups([new RedisNode(masterClientOf(client))]);
    try {
      const heard: string[] = [];
      await wakeups.listen(['sentinel-wake'], (next) => heard.push(next));
      // PUBLISH answers how many subscribers it reached: the engine's own subscriber is on that server.
      expect(await client.publish('sentinel-wake', 'before')).toBe(1);
      await expect.poll(() => heard).toEqual(['before']);
      const promoted = await group.failover();
      await untilServes(client, group.server(promoted).port);
      // The subscriber reaches the new master by itself (or hears it through the old one, now its replica).
      let sent = 0;
      await expect
        .poll(async () => {
          await client.publish('sentinel-wake', `after ${sent++}`);
          return heard.some((next) => next.startsWith('after'));
        }, { timeout: 15_000 })
        .toBe(true);
    } finally {
      wakeups.close();
    }
  });
});
