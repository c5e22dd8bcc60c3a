import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError, LockLostError, Redlock, RedlockConfigError, RedlockModule, type DuplicateMaster } from '../../lib/index.js';
import { connectMasters, disconnectAll, FRESH_FLEET } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { closeAll, createApp } from '../nest/nest-helpers.js';

// One server reached under two names (a second URL, a proxy, localhost beside 127.0.0.1) must
// vote once: masters are told apart by run_id, not by the address they were given as.

let fleet: RedisFleet;
let proxy: TcpProxy;
/** Plain clients, to play another owner on one master. */
let direct: Redis[];
const opened: Redis[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
  proxy = await TcpProxy.start({ host: '127.0.0.1', port: fleet.nodes[0]!.port });
  direct = await connectMasters(fleet.urls());
});

afterEach(closeAll);

afterAll(async () => {
  disconnectAll([...opened, ...(direct ?? [])]);
  await proxy?.close();
  await fleet?.stopAll();
});

/** Master 0 twice (directly and through the proxy), then master 1: three names, two servers. */
async function twiceListed(): Promise<{ redlock: Redlock; warnings: string[]; duplicates: DuplicateMaster[] }> {
  const clients = await connectMasters([fleet.nodes[0]!.url, proxy.url, fleet.nodes[1]!.url]);
  opened.push(...clients);
  const warnings: string[] = [];
  const redlock = new Redlock(clients, { ...FRESH_FLEET, logger: { warn: (message) => warnings.push(message) } });
  const duplicates: DuplicateMaster[] = [];
  redlock.on('duplicate', (duplicate: DuplicateMaster) => duplicates.push(duplicate));
  return { redlock, warnings, duplicates };
}

describe('one server listed under two names', () => {
  it('never makes a quorum from that server alone', async () => {
    const { redlock, warnings } = await twiceListed();
    // The other real master is held by someone else: only master 0 (twice) could grant.
    await direct[1]!.set('redlock:dup-acquire', 'another-owner', 'PX', 10_000);
    // Fenced, so the scripted acquire runs: it counts a key that already holds our token as granted.
    expect(await redlock.tryAcquire('dup-acquire', 10_000, { fencing: true })).toBeNull();
    const held = await redlock.acquire('dup-acquire', 10_000, { fencing: true, retryCount: 0 }).catch((e: unknown) => e);
    expect(held).not.toHaveProperty('token');
    expect(warnings.join('\n')).toMatch(/clients\[[01]\] \(127\.0\.0\.1:\d+\) is the same server \(run_id\) as clients\[[01]\] \(127\.0\.0\.1:\d+\)/);
    await direct[1]!.del('redlock:dup-acquire');
  });

  it('votes once in every round: the duplicate is an error naming the master it repeats', async () => {
    const { redlock } = await twiceListed();
    const lock = await redlock.acquire('dup-votes', 10_000, { fencing: true });
    // Master 1 loses the key (as a restart would): what is left is one server, not a majority.
    await direct[1]!.del('redlock:dup-votes');
    const error = await lock.extend(10_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockLostError);
    // Whichever name answered first keeps the vote; the other's request is an error naming it.
    const duplicate = (error as LockLostError).nodes.find((o) => o.status === 'error');
    expect(duplicate?.error).toMatch(/same server \(run_id\) as clients\[[01]\]/);
    expect(lock.signal.aborted).toBe(true);
    await lock.release();
  });

  it('is refused by verifyMasters, and the event names both', async () => {
    const { redlock, duplicates } = await twiceListed();
    const error = await redlock.verifyMasters().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).argument).toBe('clients[1]');
    expect((error as Error).message).toMatch(/same server \(run_id\) as clients\[0\]/);
    // Whichever name answered first keeps the vote; the other is the duplicate.
    expect(duplicates).toHaveLength(1);
    expect([duplicates[0]!.index, duplicates[0]!.sameAsIndex].sort()).toEqual([0, 1]);
    expect([duplicates[0]!.node, duplicates[0]!.sameAs].sort()).toEqual([`127.0.0.1:${fleet.nodes[0]!.port}`, `127.0.0.1:${proxy.port}`].sort());
  });

  it('as localhost and 127.0.0.1 is a duplicate too', async () => {
    const port = fleet.nodes[2]!.port;
    const clients = await connectMasters([`redis://127.0.0.1:${port}`, `redis://localhost:${port}`, fleet.nodes[1]!.url]);
    opened.push(...clients);
    const redlock = new Redlock(clients, { ...FRESH_FLEET, logger: { warn: () => {} } });
    await expect(redlock.verifyMasters()).rejects.toThrow(/invalid clients\[1\]: "localhost:\d+" \(the same server \(run_id\) as clients\[0\]/);
  });

  it('fails the Nest module at bootstrap, naming the nodes option', async () => {
    const nodes = [fleet.nodes[0]!.url, proxy.url, fleet.nodes[1]!.url];
    const error = await createApp({ imports: [RedlockModule.forRoot({ nodes })] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedlockConfigError);
    expect((error as Error).message).toMatch(/^RedlockModule: invalid options\.nodes\[1\]: .*same server \(run_id\) as options\.nodes\[0\]/);
  });

  it('counts distinct servers as before', async () => {
    const redlock = new Redlock(direct, FRESH_FLEET);
    await expect(redlock.verifyMasters()).resolves.toBeUndefined();
    const lock = await redlock.acquire('distinct', 5_000, { fencing: true });
    await lock.release();
  });
});
