import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { afterEach, describe, expect, it } from 'vitest';
import { LockHeldError, LockKindMismatchError, LockLostError, LockUpgradeError, RedlockConfigError, RedlockService, WithLock } from '../../lib/index.js';
import { closeAll, createApp } from '../nest/nest-helpers.js';
import type { LockTarget } from './lock-contract.js';

// Readers and semaphores through the Nest layer, the same assertions for every module that
// claims to give them (RedlockModule on real masters, RedlockTestingModule in memory).

const TTL_MS = 5_000;

@Injectable()
class SharedJobs {
  constructor(private readonly redlock: RedlockService) {}

  @WithLock('sem:{0}', { ttlMs: TTL_MS, limit: 2, onLocked: 'fail' })
  async export(id: string) {
    const lock = this.redlock.currentLock(`sem:${id}`);
    return { limit: lock?.limit, slots: lock?.slots };
  }

  @WithLock('pool:{0}', { ttlMs: TTL_MS, limit: 5, permits: 3, onLocked: 'fail' })
  async report(id: string) {
    const lock = this.redlock.currentLock(`pool:${id}`);
    return { permits: lock?.permits, slots: lock?.slots };
  }

  @WithLock('doc:{0}', { ttlMs: TTL_MS, mode: 'read', onLocked: 'fail' })
  async read(id: string) {
    return { mode: this.redlock.currentLock(`doc:${id}`)?.mode };
  }

  @WithLock('doc:{0}', { ttlMs: TTL_MS, onLocked: 'fail' })
  async write(id: string) {
    return { mode: this.redlock.currentLock(`doc:${id}`)?.mode };
  }
}

@Injectable()
class BadLimit {
  @WithLock('bad', { limit: 0 })
  async run() {}
}

@Injectable()
class BadWeight {
  @WithLock('bad', { limit: 2, permits: 3 })
  async run() {}
}

export function sharedLockContract(target: () => LockTarget): void {
  afterEach(async () => {
    await closeAll();
  });

  async function app() {
    const nest = await createApp({ imports: [target().lockModule({ defaultTtlMs: TTL_MS })], providers: [SharedJobs] });
    return { locks: nest.get(RedlockService), jobs: nest.get(SharedJobs), faults: target().faults(nest) };
  }

  describe('semaphores and read-write locks', () => {
    it('@WithLock with limit: 2 runs beside one other permit holder, and not beside two', async () => {
      const { locks, jobs } = await app();
      const first = await locks.acquire('sem:1', TTL_MS, { limit: 2 });
      const ran = await jobs.export('1');
      expect(ran.limit).toBe(2);
      expect(ran.slots).toHaveLength(1);
      expect(ran.slots).not.toEqual(first.slots);
      const second = await locks.tryAcquire('sem:1', TTL_MS, { limit: 2 });
      expect(second).not.toBeNull();
      await expect(jobs.export('1')).rejects.toBeInstanceOf(LockHeldError);
      await Promise.all([first.release(), second!.release()]);
      expect((await jobs.export('1')).limit).toBe(2);
    });

    it('@WithLock with permits: 3 of limit 5 takes three slots, all or none, beside the two left', async () => {
      const { locks, jobs } = await app();
      const pair = await locks.acquire('pool:1', TTL_MS, { limit: 5, permits: 2 });
      const ran = await jobs.report('1');
      expect(ran.permits).toBe(3);
      expect(ran.slots).toHaveLength(3);
      expect(ran.slots!.some((slot) => pair.slots!.includes(slot))).toBe(false);
      const one = await locks.tryAcquire('pool:1', TTL_MS, { limit: 5 });
      await expect(jobs.report('1')).rejects.toBeInstanceOf(LockHeldError);
      await Promise.all([pair.release(), one!.release()]);
      expect((await jobs.report('1')).permits).toBe(3);
    });

    it("@WithLock with mode: 'read' runs beside a reader; a writer does not", async () => {
      const { locks, jobs } = await app();
      const reader = await locks.acquire('doc:1', TTL_MS, { mode: 'read' });
      expect(await jobs.read('1')).toEqual({ mode: 'read' });
      await expect(jobs.write('1')).rejects.toBeInstanceOf(LockHeldError);
      await reader.release();
      expect(await jobs.write('1')).toEqual({ mode: 'write' });
      const writer = await locks.acquire('doc:1', TTL_MS);
      await expect(jobs.read('1')).rejects.toBeInstanceOf(LockHeldError);
      await writer.release();
    });

    it('using: a read inside a write is reentrant; a write inside a read is refused with LockUpgradeError', async () => {
      const { locks } = await app();
      const inner = await locks.using('doc:2', async (_signal, outer) => locks.using('doc:2', async (_s, lock) => lock === outer, { mode: 'read' }));
      expect(inner).toBe(true);
      const upgrade = await locks.using('doc:2', () => locks.using('doc:2', async () => 'no'), { mode: 'read' }).catch((e: unknown) => e);
      expect(upgrade).toBeInstanceOf(LockUpgradeError);
    });

    it('refuses another limit on a resource in use with LockKindMismatchError', async () => {
      const { locks } = await app();
      const permit = await locks.acquire('sem:2', TTL_MS, { limit: 2 });
      const error = await locks.tryAcquire('sem:2', TTL_MS, { limit: 3 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockKindMismatchError);
      expect(error).toMatchObject({ resource: 'sem:2', requested: 'limit 3', found: 'limit 2' });
      await permit.release();
    });

    it("a plain lock's tryAcquire on a resource held by permits answers null; a round that reads the kind says LockKindMismatchError", async () => {
      const { locks } = await app();
      const permit = await locks.acquire('sem:3', TTL_MS, { limit: 2 });
      // Its one round is a plain SET NX, which sees the key taken and nothing more (as for any holder).
      expect(await locks.tryAcquire('sem:3', TTL_MS)).toBeNull();
      // A fenced call's round, and a waiting call's next one, are scripted: they see the semaphore's marker.
      for (const call of [() => locks.tryAcquire('sem:3', TTL_MS, { fencing: true }), () => locks.acquire('sem:3', TTL_MS, { waitTimeoutMs: TTL_MS })]) {
        const error = await call().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(LockKindMismatchError);
        expect(error).toMatchObject({ resource: 'sem:3', requested: 'lock', found: 'limit 2' });
      }
      await permit.release();
    });

    it('a reader or a permit lost on the masters finds out at its next extension, and its signal fires', async () => {
      const { locks, faults } = await app();
      for (const [resource, options] of [['doc:lost', { mode: 'read' as const }], ['sem:lost', { limit: 3 }]] as const) {
        const lock = await locks.acquire(resource, TTL_MS, options);
        await faults.loseLock(resource);
        await expect(lock.extend()).rejects.toBeInstanceOf(LockLostError);
        expect(lock.signal.aborted).toBe(true);
        await lock.release();
      }
      await faults.clear();
    });

    it('refuses a bad limit, and more permits than the limit, at bootstrap', async () => {
      await expect(createApp({ imports: [target().lockModule()], providers: [BadLimit] })).rejects.toBeInstanceOf(RedlockConfigError);
      await expect(createApp({ imports: [target().lockModule()], providers: [BadWeight] })).rejects.toThrow(/@WithLock on BadWeight\.run: .*permits/);
    });
  });
}
