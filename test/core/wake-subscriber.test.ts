import { execFileSync, fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RedlockError } from '../../lib/index.js';
import { ProtocolViolation, PubSubReader, type PubSubReply } from '../../lib/core/waiting/pubsub-replies.js';
import { RedisNode } from '../../lib/core/voters/redis-node.js';
import { ReleaseWakeups } from '../../lib/core/waiting/release-wakeups.js';
import { masterClientOf } from '../../lib/core/voters/clients/clients.js';

import { WakeSubscriber } from '../../lib/core/waiting/wake-subscriber.js';
import { bulk, FakeMaster } from '../support/fake-master.js';
import { freePort } from '../support/free-port.js';
import { connectMasters, disconnectAll, lockClient, untilReady } from '../support/masters.js';
import { waitBesideFake } from '../support/wait-beside-fake.js';
import { registry } from '../support/process-cleanup.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { CLIENT_LIBRARIES, lockClientWith } from '../support/lock-clients.js';
import type { RedlockClient } from '../../lib/core/voters/clients/clients.js';

const wakeEndpointOf = (client: RedlockClient) => (attempt: number) => masterClientOf(client).wakeEndpoint(attempt);

// Whatever a master sends on the connection the engine opens for wake-ups is that master's
// failure (reported, and covered by the waiters' fallback timers), never a crash of the process.
// ioredis throws from its data handler, outside any promise, at an integer in answer to
// SUBSCRIBE: with ioredis as the subscriber, one such master killed the host.

let fleet: RedisFleet;
const opened: (Redis | RedlockClient)[] = [];
const fakes: FakeMaster[] = [];
const closers: (() => void)[] = [];
let uncaught: unknown[] = [];
const onUncaught = (reason: unknown) => uncaught.push(reason);

beforeAll(async () => {
  fleet = await RedisFleet.start(2);
});

beforeEach(() => {
  uncaught = [];
  process.on('unhandledRejection', onUncaught);
  process.on('uncaughtException', onUncaught);
});

afterEach(() => {
  process.off('unhandledRejection', onUncaught);
  process.off('uncaughtException', onUncaught);
  for (const close of closers.splice(0)) close();
});

afterAll(async () => {
  disconnectAll(opened);
  await Promise.all(fakes.map((fake) => fake.close()));
  await fleet?.stopAll();
});

function confirmations(command: string[]): string {
  return command
    .slice(1)
    .map((channel, i) => `*3\r\n${bulk(command[0]!.toLowerCase())}${bulk(channel)}:${i + 1}\r\n`)
    .join('');
}

async function fake(answer: (command: string[]) => string | string[]): Promise<FakeMaster> {
  const master = await FakeMaster.start(answer);
  fakes.push(master);
  return master;
}

describe('a master that answers :1 to everything but the connection set-up, with a caller waiting', () => {
  it('leaves the process running, and the waiter gets the lock from the other masters', async () => {
    const child = fork(fileURLToPath(new URL('../support/wait-beside-fake.ts', import.meta.url)), [JSON.stringify({ urls: fleet.urls(), answer: ':1\r\n' })], {
      execArgv: ['--import', new URL('../support/ts-loader/register.mjs', import.meta.url).href],
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    registry.children.add(child);
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', (exitCode) => resolve(exitCode)));
    registry.children.delete(child);
    expect(code, `the child's output:\n${output}`).toBe(0);
    const result = JSON.parse(output.trim().split('\n').at(-1)!) as { acquired: boolean; warning: string };
    expect(result.acquired).toBe(true);
    expect(result.warning).toMatch(/^redlock: master 127\.0\.0\.1:\d+ sent an integer where a status, an error or an array of 3 comes on its wake-up connection/);
  });
});

describe('whatever a master answers to SUBSCRIBE', () => {
  const garbage: Record<string, string | string[]> = {
    ':0': ':0\r\n',
    'an error': '-ERR no subscriptions today\r\n',
    'a bulk string where an array comes': bulk('subscribe'),
    'an array of 2': `*2\r\n${bulk('subscribe')}:1\r\n`,
    'an array of 4': `*4\r\n${bulk('subscribe')}${bulk('x')}:1\r\n:1\r\n`,
    'an empty array': '*0\r\n',
    'a null array': '*-1\r\n',
    'integers in the array': '*3\r\n:1\r\n:1\r\n:1\r\n',
    'a null channel': `*3\r\n${bulk('subscribe')}$-1\r\n:1\r\n`,
    'a huge bulk length': `*3\r\n$99999999999\r\n`,
    'a huge array length': '*2147483647\r\n',
    'a confirmation of another channel': `*3\r\n${bulk('subscribe')}${bulk('not-asked-for')}:1\r\n`,
    'a message whose payload is an integer': `*3\r\n${bulk('message')}${bulk('x')}:1\r\n`,
    'a RESP3 push': `>3\r\n${bulk('subscribe')}${bulk('x')}:1\r\n`,
    'a RESP3 map': '%1\r\n+a\r\n+b\r\n',
    'no CRLF for ever': 'x'.repeat(10_000),
    'split frames of garbage': ['*3\r\n$9\r\nsubsc', 'ribe\r\n$', '3\r\nabc\r\n:', 'x\r\n'],
  };

  it.each(Object.entries(garbage))('%s: the waiter ends with its lock or a typed error, and the master is reported', async (_name, answer) => {
    const master = await fake((command) => (command[0]!.toUpperCase() === 'SUBSCRIBE' ? answer : ':1\r\n'));
    const warnings: string[] = [];
    const failures: string[] = [];
    const { outcome, close } = await waitBesideFake(fleet.urls(), master, opened, {
      logger: { warn: (message) => warnings.push(message) },
      instrumentation: { masterFailed: (at, failure, operation) => failures.push(`${at.name} ${failure} ${operation}`) },
    });
    closers.push(close);
    if ('error' in outcome) expect(outcome.error).toBeInstanceOf(RedlockError);
    else await outcome.lock.release();
    await expect.poll(() => failures).toContain(`127.0.0.1:${master.port} error wakeup`);
    expect(warnings.filter((warning) => warning.includes('wake-up'))).toHaveLength(1);
    expect(uncaught).toEqual([]);
  });
});

describe('WakeSubscriber', () => {
  it('after garbage, reconnects with backoff and subscribes again; one report per streak goes to the log', async () => {
    let misbehave = 3;
    const master = await fake((command) => (command[0] === 'SUBSCRIBE' && misbehave-- > 0 ? ':1\r\n' : confirmations(command)));
    const client = lockClient(master.url, { lazyConnect: true });
    const reports: [string, boolean][] = [];
    const subscriber = new WakeSubscriber(wakeEndpointOf(client), 'home', () => {}, (problem, first) => reports.push([problem, first]));
    closers.push(() => subscriber.close());
    await expect.poll(() => subscriber.joinedNow, { timeout: 5_000 }).toBe(true);
    await subscriber.subscribe(['later']);
    expect(master.commands.filter(([name]) => name === 'SUBSCRIBE').map((command) => command.slice(1))).toEqual([['home'], ['home'], ['home'], ['home'], ['later']]);
    expect(reports.map(([, first]) => first)).toEqual([true, false, false]);
    expect(uncaught).toEqual([]);
  });

  it('survives a listener and a logger that throw', async () => {
    const master = await fake((command) => `${confirmations(command)}*3\r\n${bulk('message')}${bulk('home')}${bulk('hi')}`);
    const reports: string[] = [];
    const subscriber = new WakeSubscriber(
      wakeEndpointOf(lockClient(master.url, { lazyConnect: true })),
      'home',
      () => {
        throw new Error('listener bug');
      },
      (problem) => {
        reports.push(problem);
        throw new Error('logger down');
      },
    );
    closers.push(() => subscriber.close());
    await expect.poll(() => reports).toEqual(['published a message that could not be read']);
    // The message was the listener's problem, not the connection's: it stays up.
    expect(subscriber.joinedNow).toBe(true);
    master.answer = () => ':1\r\n';
    await subscriber.subscribe(['now-garbage']);
    await expect.poll(() => reports.length).toBeGreaterThan(1);
    expect(uncaught).toEqual([]);
  });

  it.each(CLIENT_LIBRARIES)('authenticates as the %s client does, by password or by user and password, and reports a refusal without them', async (library) => {
    const secured = await RedisFleet.start(1);
    try {
      const [admin] = await connectMasters(secured.urls());
      opened.push(admin!);
      await admin!.acl('SETUSER', 'waker', 'on', '>waker-secret', '&*', '+@all');
      await admin!.config('SET', 'requirepass', 'wake-secret');
      await admin!.auth('wake-secret');
      const port = secured.nodes[0]!.port;
      for (const options of [{ password: 'wake-secret' }, { username: 'waker', password: 'waker-secret' }]) {
        const client = await lockClientWith(library, { host: '127.0.0.1', port, ...options });
        opened.push(client);
        const wakeups = new ReleaseWakeups([new RedisNode(masterClientOf(client))]);
        closers.push(() => wakeups.close());
        const heard: string[] = [];
        await wakeups.listen(['auth-key'], (next) => heard.push(next));
        // PUBLISH answers how many subscribers it reached: the subscription is in place.
        expect(await admin!.publish('auth-key', 'someone')).toBe(1);
        await expect.poll(() => heard).toEqual(['someone']);
        wakeups.close();
      }
      const refused = await lockClientWith(library, { host: '127.0.0.1', port, username: 'waker', password: 'not-the-secret' }, false);
      const reports: string[] = [];
      const wakeups = new ReleaseWakeups([new RedisNode(masterClientOf(refused))], (node, problem) => reports.push(`${node.name} ${problem}`));
      closers.push(() => wakeups.close());
      await wakeups.listen(['auth-key'], () => {});
      await expect.poll(() => reports[0]).toBe(`127.0.0.1:${port} sent an error in answer to AUTH (wrong username or password?)`);
      expect(reports.join()).not.toMatch(/secret|waker/);
    } finally {
      await secured.stopAll();
    }
  });

  it.each(CLIENT_LIBRARIES)('reaches a master over TLS and over a unix socket as the %s client does', async (library) => {
    const dir = mkdtempSync(join(tmpdir(), 'redlock-wake-tls-'));
    registry.dirs.add(dir);
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
    const tlsPort = await freePort();
    const socketPath = join(dir, 'redis.sock');
    const secured = await RedisFleet.start(1, {
      extraArgs: ['--tls-port', String(tlsPort), '--tls-cert-file', join(dir, 'cert.pem'), '--tls-key-file', join(dir, 'key.pem'),
        '--tls-ca-cert-file', join(dir, 'cert.pem'), '--tls-auth-clients', 'no', '--unixsocket', socketPath, '--unixsocketperm', '700'],
    });
    try {
      const [publisher] = await connectMasters(secured.urls());
      opened.push(publisher!);
      const ca = readFileSync(join(dir, 'cert.pem'));
      for (const settings of [{ host: '127.0.0.1', port: tlsPort, ca }, { path: socketPath }]) {
        const client = await lockClientWith(library, settings);
        opened.push(client);
        const wakeups = new ReleaseWakeups([new RedisNode(masterClientOf(client))]);
        closers.push(() => wakeups.close());
        await wakeups.listen(['elsewhere-key'], () => {});
        // Its SUBSCRIBE is confirmed on the wake-up connection; the server counts it a moment later under load.
        await expect.poll(() => publisher!.publish('elsewhere-key', '')).toBe(1);
        wakeups.close();
      }
    } finally {
      await secured.stopAll();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('subscribes again after its master restarts', async () => {
    const [client, publisher] = await connectMasters([fleet.urls()[1]!, fleet.urls()[1]!]);
    opened.push(client!, publisher!);
    const wakeups = new ReleaseWakeups([new RedisNode(masterClientOf(client!))]);
    closers.push(() => wakeups.close());
    await wakeups.listen(['restart-key'], () => {});
    expect(await publisher!.publish('restart-key', '')).toBe(1);
    await fleet.restart(1);
    await untilReady(publisher!);
    await expect.poll(() => publisher!.publish('restart-key', ''), { timeout: 10_000 }).toBe(1);
  });
});

describe('PubSubReader', () => {
  const frames =
    `+OK\r\n*3\r\n${bulk('subscribe')}${bulk('chan')}:1\r\n` +
    `*3\r\n${bulk('message')}${bulk('chan')}${bulk('w1/2/3/run redlock:k é')}` +
    `*3\r\n${bulk('unsubscribe')}${bulk('chan')}:0\r\n-ERR no\r\n`;
  const expected: PubSubReply[] = [
    { kind: 'status', text: 'OK' },
    { kind: 'subscribe', channel: 'chan', count: 1 },
    { kind: 'message', channel: 'chan', message: 'w1/2/3/run redlock:k é' },
    { kind: 'unsubscribe', channel: 'chan', count: 0 },
    { kind: 'error' },
  ];

  it('reads frames split at every byte as it reads them whole', () => {
    const bytes = Buffer.from(frames);
    const whole = new PubSubReader(() => 1_024).push(bytes);
    expect(whole).toEqual(expected);
    const reader = new PubSubReader(() => 1_024);
    const split: PubSubReply[] = [];
    for (let i = 0; i < bytes.length; i++) split.push(...reader.push(bytes.subarray(i, i + 1)));
    expect(split).toEqual(expected);
  });

  it('refuses a length beyond the limit at its header, and names what came without its text', () => {
    const reader = new PubSubReader(() => 1_024);
    expect(() => reader.push(Buffer.from('*3\r\n$1025\r\n'))).toThrow(new ProtocolViolation('a bulk string of 1025 bytes, more than any channel or message of ours'));
    for (const [bytes, problem] of [
      ['+wake-secret\r\n', undefined],
      [':1\r\n', 'an integer where a status, an error or an array of 3 comes'],
      ['wake-secret\r\n', 'bytes that are no RESP frame where a status, an error or an array of 3 comes'],
      [`*3\r\n${bulk('wake-secret')}`, 'an array that is no message nor (un)subscribe confirmation'],
      [`*3\r\n${bulk('subscribe')}+wake-secret\r\n`, 'a status where a bulk string comes'],
      [`*3\r\n${bulk('subscribe')}${bulk('c')}:wake-secret\r\n`, 'an integer where a subscription count comes'],
      [`*3\r\n$3\r\nsubscribe\r\n`, 'a bulk string longer than its length says'],
    ] as const) {
      const read = () => new PubSubReader(() => 1_024).push(Buffer.from(bytes));
      if (problem === undefined) expect(read()).toEqual([{ kind: 'status', text: 'wake-secret' }]);
      else expect(read).toThrow(new ProtocolViolation(problem));
    }
  });
});
