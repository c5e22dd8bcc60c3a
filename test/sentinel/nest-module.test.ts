import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedlockConfigError, RedlockModule, RedlockService, type RedlockModuleOptions } from '../../lib/index.js';
import { closeAll, createApp } from '../nest/nest-helpers.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { SentinelGroup } from '../support/sentinel-group.js';

// The module's `nodes` may name a master by its Sentinels (ioredis options with `sentinels` and
// `name`): it opens a Sentinel-managed connection for it, and says clearly what is wrong with
// options that would not work.

let group: SentinelGroup;
let plain: RedisFleet;
const PASSWORD = 'sentinel-s3cret';

beforeAll(async () => {
  [group, plain] = await Promise.all([SentinelGroup.start({ name: 'nest-voter', replicas: 1 }), RedisFleet.start(2)]);
});
afterEach(async () => {
  await closeAll();
});
afterAll(async () => {
  await closeAll();
  await Promise.all([group?.stopAll(), plain?.stopAll()]);
});

@Injectable()
class Orders {
  constructor(readonly redlock: RedlockService) {}
}

function options(nodes: RedlockModuleOptions['nodes'], extra: Partial<RedlockModuleOptions> = {}): RedlockModuleOptions {
  return { nodes, restartQuarantineMs: false, nodeTimeoutMs: 2_000, ...extra };
}

describe('RedlockModule with a Sentinel-managed master', () => {
  it('connects to it through its Sentinels and locks on it', async () => {
    const nodes = [group.clientOptions(), ...plain.urls()];
    const app = await createApp({ imports: [RedlockModule.forRoot(options(nodes))], providers: [Orders] });
    const orders = app.get(Orders);
    const lock = await orders.redlock.acquire('order:1');
    await expect.poll(() => group.direct(group.masterIndex).exists('redlock:order:1')).toBe(1);
    await lock.release();
  });

  it('waits for the replica of a Sentinel-managed master when asked to (replicaAcks)', async () => {
    // Voters that all have a replica: the Sentinel-managed master twice would be refused, so one
    // more group without Sentinel stands beside it, and a third plain pair.
    const [pairA, pairB] = await Promise.all([
      SentinelGroup.start({ name: 'pair-a', sentinels: 0 }),
      SentinelGroup.start({ name: 'pair-b', sentinels: 0 }),
    ]);
    try {
      const nodes = [group.clientOptions(), pairA.masterUrl(), pairB.masterUrl()];
      const app = await createApp({ imports: [RedlockModule.forRoot(options(nodes, { replicaAcks: 1 }))], providers: [Orders] });
      const orders = app.get(Orders);
      const lock = await orders.redlock.acquire('order:2');
      // Acknowledged: the replicas of a quorum have the key the moment the lock is granted.
      const replicas = [group, pairA, pairB].map((g) => g.direct(g.replicaIndexes()[0]!));
      const held = await Promise.all(replicas.map((replica) => replica.exists('redlock:order:2')));
      expect(held.filter((n) => n === 1).length).toBeGreaterThanOrEqual(2);
      await lock.release();
    } finally {
      await closeAll();
      await Promise.all([pairA.stopAll(), pairB.stopAll()]);
    }
  }, 60_000);

  const sentinel = () => group.clientOptions().sentinels[0]!;
  it.each<[string, () => RedlockModuleOptions['nodes'][number], RegExp]>([
    ['sentinels that are not an array', () => ({ sentinels: 'x' as never, name: 'm' }), /options\.nodes\[0\]\.sentinels must be a non-empty array of \{ host, port \}.*\(got a string\)/],
    ['no sentinels', () => ({ sentinels: [], name: 'm' }), /options\.nodes\[0\]\.sentinels must be a non-empty array/],
    ['a sentinel that is not an object', () => ({ sentinels: [7 as never], name: 'm' }), /options\.nodes\[0\]\.sentinels\[0\] must be a \{ host, port \} object \(got a number\)/],
    ['a sentinel port out of range', () => ({ sentinels: [{ host: '127.0.0.1', port: 0 }], name: 'm' }), /options\.nodes\[0\]\.sentinels\[0\]\.port must be an integer in \[1, 65535\] \(got a number\)/],
    ['a sentinel with an empty host', () => ({ sentinels: [{ host: '', port: 26379 }], name: 'm' }), /options\.nodes\[0\]\.sentinels\[0\]\.host must be a non-empty string/],
    ['no master name', () => ({ sentinels: [sentinel()], sentinelPassword: PASSWORD }), /options\.nodes\[0\]\.name must be the name under which the Sentinels monitor this master \(got undefined\)/],
    ['host and port beside sentinels', () => ({ sentinels: [sentinel()], name: 'm', host: '127.0.0.1', port: 6380, password: PASSWORD }), /options\.nodes\[0\] gives host, port beside sentinels; ioredis asks the Sentinels where the master is and ignores them/],
    ['a replica role', () => ({ sentinels: [sentinel()], name: 'm', role: 'slave' }), /options\.nodes\[0\]\.role must be "master" \(the default\): a replica refuses the writes a lock needs/],
    ['a sentinel password that is not a string', () => ({ sentinels: [sentinel()], name: 'm', sentinelPassword: 42 as never }), /options\.nodes\[0\]\.sentinelPassword must be a string \(got a number\)/],
    ['a master name without sentinels', () => ({ host: '127.0.0.1', port: 6380, name: 'm', password: PASSWORD }), /options\.nodes\[0\]\.name names a master monitored by Sentinel, but no sentinels are given/],
  ])('refuses %s, clearly and without echoing a password', async (_name, node, message) => {
    const error = await createApp({ imports: [RedlockModule.forRoot(options([node(), ...plain.urls()]))] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedlockConfigError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain(PASSWORD);
  });

  it('refuses at bootstrap a group name its Sentinels do not monitor, naming the option', async () => {
    const typo = { ...group.clientOptions(), name: 'nest-votr' };
    const error = await createApp({ imports: [RedlockModule.forRoot(options([typo, ...plain.urls()]))] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedlockConfigError);
    expect((error as Error).message).toMatch(
      /^RedlockModule: invalid options\.nodes\[0\]\.name: "nest-votr" \(no Sentinel monitors a master of that name \(127\.0\.0\.1:\d+ said "No such master with that name"\)/,
    );
  });

  it('refuses one Sentinel-managed master given twice, and a bad replicaAcks', async () => {
    const twice = options([group.clientOptions(), { ...group.clientOptions(), sentinelPassword: PASSWORD }, plain.urls()[0]!]);
    const error = await createApp({ imports: [RedlockModule.forRoot(twice)] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedlockConfigError);
    expect((error as Error).message).toMatch(/options\.nodes\[1\] and options\.nodes\[0\] are the same master \(sentinel:nest-voter@127\.0\.0\.1:\d+\)/);
    expect((error as Error).message).not.toContain(PASSWORD);

    const acks = await createApp({ imports: [RedlockModule.forRoot(options(plain.urls(), { replicaAcks: -1 }))] }).catch((e: unknown) => e);
    expect(acks).toBeInstanceOf(RedlockConfigError);
    expect((acks as Error).message).toMatch(/invalid options\.replicaAcks: -1/);
  });
});
