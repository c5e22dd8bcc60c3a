/**
 * A replica of a Nest app with one `@WhileLeader` duty, for test/nest/leadership.test.ts and
 * bench/ takeover times. While it leads, the duty writes to a fenced store (a Redis server that is
 * not a master) every few ms with its term, and reports each write to the parent over IPC with
 * the wall-clock time and how long its leadership could still be relied on, so the parent can
 * check that no two terms' validity windows overlap and that a deposed leader's writes are refused.
 *
 * Messages: 'ready'; { kind: 'elected', term, at }; { kind: 'write', term, at, remainingMs,
 * accepted }; { kind: 'ended', term, at, reason }. `at` is Date.now(): one clock for every
 * process on the machine.
 */
import 'reflect-metadata';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import { type Leadership, LeadershipService, RedlockModule, WhileLeader } from '../../../lib/index.js';

export interface LeaderAppConfig {
  nodes: string[];
  /** The fenced store: a Redis server that is not one of the masters. */
  store: string;
  replica: string;
  leaseMs: number;
  /** The restart quarantine on (the default), or off (the control). */
  quarantine: boolean;
  /** How often the leader writes, in ms. */
  writeEveryMs: number;
  /** Campaign only when the parent says 'campaign' (by hand, through LeadershipService), not at bootstrap. */
  manual?: boolean;
}

export type LeaderEvent =
  | { kind: 'elected'; replica: string; term: number; at: number }
  | { kind: 'write'; replica: string; term: number; at: number; remainingMs: number; accepted: boolean }
  | { kind: 'ended'; replica: string; term: number; at: number; reason: string };

const config = JSON.parse(process.argv[2]!) as LeaderAppConfig;
const store = new Redis(config.store, { lazyConnect: false, maxRetriesPerRequest: 1 });

/** Accepts a write only with a term at least as high as every term seen: a fencing store. */
const FENCED_WRITE = `local top = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < top then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1`;

const send = (event: LeaderEvent) => process.send?.(event);

async function lead(signal: AbortSignal, leadership: Leadership): Promise<void> {
  send({ kind: 'elected', replica: config.replica, term: leadership.term, at: Date.now() });
  // Checked before each write, as a careful duty does; a write that lands after a stall is the fence's to refuse.
  while (!signal.aborted) {
    const remainingMs = leadership.remainingMs();
    if (remainingMs <= 0) break;
    const at = Date.now();
    const accepted = (await store.eval(FENCED_WRITE, 1, 'fenced:duty', leadership.term)) === 1;
    send({ kind: 'write', replica: config.replica, term: leadership.term, at, remainingMs, accepted });
    await sleep(config.writeEveryMs);
  }
}

@Injectable()
class Duty {
  @WhileLeader('duty')
  lead(signal: AbortSignal, leadership: Leadership) {
    return lead(signal, leadership);
  }
}

@Module({
  imports: [
    RedlockModule.forRoot({
      nodes: config.nodes,
      leadership: { identity: config.replica, leaseMs: config.leaseMs },
      // The restart quarantine's window is the longest ttl: the lease's here.
      defaultTtlMs: config.leaseMs,
      ...(config.quarantine ? {} : { restartQuarantineMs: false }),
      nodeTimeoutMs: 200,
      logger: { warn: () => {} },
    }),
  ],
  providers: config.manual ? [] : [Duty],
})
class LeaderAppModule {}

const app = await NestFactory.createApplicationContext(LeaderAppModule, { logger: false });
app.get(LeadershipService).changes().subscribe((change) => {
  if (change.kind === 'ended') send({ kind: 'ended', replica: config.replica, term: change.term, at: Date.now(), reason: change.reason ?? 'unknown' });
});
await app.init();
process.on('message', (message) => {
  if (message === 'campaign') {
    void app
      .get(LeadershipService)
      .campaign('duty')
      .then((leadership) => lead(leadership.signal, leadership));
  }
  if (message === 'stop') {
    void app.close().then(() => {
      store.disconnect();
      process.exit(0);
    });
  }
});
process.send!('ready');
