import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, LockLostError } from '../../lib/core/index.js';
import { InMemoryRedlock } from '../../lib/testing/index.js';
import { PATIENT, separateEngine } from '../support/masters.js';
import { heldEverywhere } from '../support/enlisted.js';
import { fileFleet } from '../support/file-fleet.js';

const { fleet: masters, opened } = fileFleet(3);

const engine = () => separateEngine(masters().urls(), opened, PATIENT);

describe('handing a held lock to another process', () => {
  it('a scheduler takes the lock and hands it over; the worker extends and releases it, with the same fence', async () => {
    const scheduler = await engine();
    const worker = await engine();
    const other = await engine();
    const lock = await scheduler.redlock.acquire('job:42', 5_000, { fencing: true });
    await heldEverywhere(scheduler.clients, 'redlock:job:42');
    const handle = lock.handOver();
    // Done with on the scheduler's side, but not released on the masters.
    expect(lock.remainingMs()).toBe(0);
    expect(scheduler.redlock.heldLocks.size).toBe(0);
    expect(await lock.release()).toMatchObject({ releasedOn: 0, handedOver: true });
    await scheduler.redlock.releaseAll();
    expect(await other.redlock.tryAcquire('job:42', 5_000)).toBeNull();

    const adopted = await worker.redlock.adopt(handle, 8_000);
    expect(adopted.fence).toBe(lock.fence);
    expect(adopted.token).toBe(lock.token);
    expect(adopted.remainingMs()).toBeGreaterThan(7_000);
    expect(worker.redlock.heldLocks.has(adopted)).toBe(true);
    await adopted.extend(8_000);
    await adopted.release();
    const next = await other.redlock.tryAcquire('job:42', 5_000, { fencing: true });
    expect(next).not.toBeNull();
    expect(next!.fence!).toBeGreaterThan(lock.fence!);
    await next!.release();
  });

  it('stops the first holder extending it: a session lock handed over is no longer extended there', async () => {
    const scheduler = await engine();
    const worker = await engine();
    const other = await engine();
    const session = await scheduler.redlock.enter('job:session', 600);
    await worker.redlock.adopt(session.lock.handOver());
    // Nobody extends it from now on (the worker does not), though the scheduler's session is still
    // open: its auto-extension would otherwise keep the keys alive for as long as it is.
    await expect
      .poll(
        async () => {
          const lock = await other.redlock.tryAcquire('job:session', 1_000);
          await lock?.release();
          return lock !== null;
        },
        { timeout: 5_000, interval: 100 },
      )
      .toBe(true);
    await session.exit();
  });

  it('hands over readers and permits too, which keep their slot', async () => {
    const a = await engine();
    const b = await engine();
    const permit = await a.redlock.acquire('pool:db', 5_000, { limit: 2 });
    const reader = await a.redlock.acquire('doc:7', 5_000, { mode: 'read' });
    const [adoptedPermit, adoptedReader] = await Promise.all([b.redlock.adopt(permit.handOver()), b.redlock.adopt(reader.handOver())]);
    expect(adoptedPermit.limit).toBe(2);
    expect(adoptedPermit.slots).toEqual(permit.slots);
    expect(adoptedReader.mode).toBe('read');
    await expect.poll(() => b.redlock.inspect(['pool:db', 'doc:7'])).toMatchObject([
      { state: 'held', kind: 'permits', holders: 1 },
      { state: 'held', kind: 'read', holders: 1 },
    ]);
    await adoptedPermit.extend();
    await Promise.all([adoptedPermit.release(), adoptedReader.release()]);
    await expect.poll(() => b.redlock.inspect(['pool:db', 'doc:7'])).toMatchObject([{ state: 'free' }, { state: 'free' }]);
  });

  it('a caller of the first process waiting for the resource goes to the masters and gets it once the new holder releases', async () => {
    const a = await engine();
    const b = await engine();
    const lock = await a.redlock.acquire('job:queue', 5_000);
    const waiting = a.redlock.acquire('job:queue', 5_000, { waitTimeoutMs: 10_000 });
    const adopted = await b.redlock.adopt(lock.handOver());
    let got = false;
    void waiting.then(() => (got = true));
    // b holds it: a's waiter must not have it.
    expect((await b.redlock.inspect('job:queue'))[0]!.state).toBe('held');
    expect(got).toBe(false);
    await adopted.release();
    await (await waiting).release();
  });

  it('refuses a handle of a released lock, a lock handed over twice, and a string that is not a handle (without echoing it)', async () => {
    const a = await engine();
    const b = await engine();
    const lock = await a.redlock.acquire('job:once', 5_000);
    const handle = lock.handOver();
    expect(() => lock.handOver()).toThrow(LockLostError);
    const adopted = await b.redlock.adopt(handle);
    await adopted.release();
    await expect(b.redlock.adopt(handle)).rejects.toThrow(/not held on a majority of these masters/);
    const secret = 'redlock-handle:1:c2VjcmV0LXRva2Vu';
    const error = await b.redlock.adopt(secret).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(String((error as Error).message)).not.toContain('c2VjcmV0LXRva2Vu');
    await expect(b.redlock.adopt('order:1')).rejects.toThrow(InvalidArgumentError);
  });

  it('works alike on the in-memory engine', async () => {
    const redlock = new InMemoryRedlock();
    const lock = await redlock.acquire('job', 5_000, { fencing: true });
    const adopted = await redlock.adopt(lock.handOver());
    expect(adopted.fence).toBe(lock.fence);
    expect(await redlock.tryAcquire('job', 1_000)).toBeNull();
    await adopted.release();
    expect(await redlock.tryAcquire('job', 1_000)).not.toBeNull();
    redlock.close();
  });
});
