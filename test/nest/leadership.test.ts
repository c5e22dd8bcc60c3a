import { Injectable } from '@nestjs/common';
import { HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { type Leadership, LeadershipService, RedlockConfigError, RedlockModule, WhileLeader } from '../../lib/index.js';
import { LeadershipHealthIndicator } from '../../lib/terminus/index.js';
import { RedlockTestingModule } from '../../lib/testing/index.js';
import { fileFleet } from '../support/file-fleet.js';
import { closeAll, closeApp, createApp, deferred, fleetOptions } from './nest-helpers.js';

const { fleet } = fileFleet(3);

afterEach(() => closeAll());

/** A provider with one duty, recording each run: which replica, which term, and when it was told to stop. */
function dutyProvider(replica: string, runs: { replica: string; term: number; stopped?: boolean }[]) {
  @Injectable()
  class Consumer {
    @WhileLeader('stream-consumer')
    async consume(signal: AbortSignal, leadership: Leadership) {
      const run: { replica: string; term: number; stopped?: boolean } = { replica, term: leadership.term };
      runs.push(run);
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      run.stopped = true;
    }
  }
  return Consumer;
}

const replicaApp = (replica: string, runs: { replica: string; term: number; stopped?: boolean }[], extra: object = {}) =>
  createApp({
    imports: [RedlockModule.forRoot({ ...fleetOptions(fleet()), leadership: { identity: replica, leaseMs: 2_000 }, ...extra })],
    providers: [dutyProvider(replica, runs)],
  });

describe('@WhileLeader and LeadershipService, two replicas on real masters', () => {
  it('runs the duty on one replica; its shutdown stops the duty, resigns, and the other replica runs it with a larger term', async () => {
    const runs: { replica: string; term: number; stopped?: boolean }[] = [];
    const a = await replicaApp('pod-a', runs);
    await expect.poll(() => runs.length, { timeout: 10_000 }).toBe(1);
    const b = await replicaApp('pod-b', runs);
    const serviceA = a.get(LeadershipService);
    const serviceB = b.get(LeadershipService);
    expect(serviceA.isLeader('stream-consumer')).toBe(true);
    expect(serviceB.isLeader('stream-consumer')).toBe(false);
    await expect.poll(() => serviceB.leader('stream-consumer'), { timeout: 10_000 }).toMatchObject({ identity: 'pod-a', term: runs[0]!.term });
    const elected = firstValueFrom(serviceB.changes('stream-consumer'));
    await closeApp(a);
    expect(runs[0]).toMatchObject({ replica: 'pod-a', stopped: true });
    expect(await elected).toMatchObject({ kind: 'elected', election: 'stream-consumer', identity: 'pod-b' });
    await expect.poll(() => runs.length, { timeout: 10_000 }).toBe(2);
    expect(runs[1]!.replica).toBe('pod-b');
    expect(runs[1]!.term).toBeGreaterThan(runs[0]!.term);
    expect(serviceB.isLeader('stream-consumer')).toBe(true);
    expect(runs.filter((run) => !run.stopped)).toHaveLength(1);
  });

  it('a duty that throws: the replica resigns and the other one takes the duty', async () => {
    const attempts: string[] = [];
    const failedOnce = deferred();
    @Injectable()
    class Flaky {
      @WhileLeader('flaky')
      async run(signal: AbortSignal) {
        attempts.push('flaky');
        failedOnce.resolve();
        throw new Error(`partner refused the connection (${signal.aborted})`);
      }
    }
    @Injectable()
    class Steady {
      @WhileLeader('flaky')
      async run(signal: AbortSignal) {
        attempts.push('steady');
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      }
    }
    const quiet = { warn: () => {}, error: () => {} };
    const options = (identity: string) => RedlockModule.forRoot({ ...fleetOptions(fleet()), leadership: { identity, leaseMs: 2_000 }, logger: quiet });
    const flaky = await createApp({ imports: [options('flaky')], providers: [Flaky] });
    await failedOnce.promise;
    const steady = await createApp({ imports: [options('steady')], providers: [Steady] });
    await expect.poll(() => steady.get(LeadershipService).isLeader('flaky'), { timeout: 10_000 }).toBe(true);
    // Once it failed, the flaky replica stood back for a lease; the steady one leads from then on.
    expect(attempts.at(-1)).toBe('steady');
    expect(flaky.get(LeadershipService).isLeader('flaky')).toBe(false);
  });

  it('reports who leads in the health check', async () => {
    const runs: { replica: string; term: number }[] = [];
    const app = await createApp({
      imports: [TerminusModule, RedlockModule.forRoot({ ...fleetOptions(fleet()), leadership: { identity: 'pod-h' } })],
      providers: [dutyProvider('pod-h', runs), LeadershipHealthIndicator],
    });
    await expect.poll(() => runs.length, { timeout: 10_000 }).toBe(1);
    const health = app.get(HealthCheckService);
    const indicator = app.get(LeadershipHealthIndicator);
    const result = await health.check([() => indicator.isHealthy('leadership', ['stream-consumer', 'nobody-campaigns'])]);
    expect(result.status).toBe('ok');
    expect(result.info?.['leadership']).toMatchObject({
      'stream-consumer': { leader: 'pod-h', term: runs[0]!.term, thisReplica: true },
      'nobody-campaigns': { leader: null, thisReplica: false },
    });
    await expect(health.check([() => indicator.isHealthy('leadership', ['nobody-campaigns'], { requireLeader: true })])).rejects.toThrow();
  });

  it('refuses a bad leadership option or election name at bootstrap', async () => {
    await expect(replicaApp('x', [], { leadership: { leaseMs: -1 } })).rejects.toThrow(/options\.leadership\.leaseMs must be a positive integer/);
    await expect(replicaApp('x', [], { leadership: { identity: '' } })).rejects.toThrow(RedlockConfigError);
    @Injectable()
    class Nameless {
      @WhileLeader('')
      run() {}
    }
    await expect(createApp({ imports: [RedlockModule.forRoot(fleetOptions(fleet()))], providers: [Nameless] })).rejects.toThrow(
      /@WhileLeader on Nameless\.run: the election's name must be a non-empty string/,
    );
  });
});

describe('@WhileLeader under RedlockTestingModule', () => {
  it('runs the duty at bootstrap, in memory', async () => {
    const runs: { replica: string; term: number }[] = [];
    const app = await createApp({ imports: [RedlockTestingModule.forRoot({ leadership: { identity: 'test' } })], providers: [dutyProvider('test', runs)] });
    await expect.poll(() => runs.length, { timeout: 10_000 }).toBe(1);
    expect(await app.get(LeadershipService).leader('stream-consumer')).toMatchObject({ identity: 'test' });
  });
});
