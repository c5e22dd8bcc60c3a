import { describe, expect, it } from 'vitest';
import { PATIENT, separateEngine } from '../support/masters.js';
import { fileFleet } from '../support/file-fleet.js';

const { fleet: masters, opened } = fileFleet(3);

describe('await using', () => {
  it('releases a lock, exits a session and resigns a leadership when the block is left, also by a throw', async () => {
    const { redlock } = await separateEngine(masters().urls(), opened, PATIENT);
    const other = (await separateEngine(masters().urls(), opened, PATIENT)).redlock;
    let inside: string[] = [];
    const block = async (fail: boolean) => {
      await using lock = await redlock.acquire('stock:1', 10_000);
      await using session = await redlock.enter('shelf:1', 10_000);
      await using leadership = await redlock.election('restock').campaign('pod-a');
      inside = [lock.resources[0]!, session.lock.resources[0]!, leadership.election];
      expect(await other.tryAcquire('stock:1', 10_000)).toBeNull();
      if (fail) throw new Error('the block failed');
    };
    await block(false);
    expect(inside).toEqual(['stock:1', 'shelf:1', 'restock']);
    expect(redlock.heldLocks.size).toBe(0);
    await expect(block(true)).rejects.toThrow('the block failed');
    expect(redlock.heldLocks.size).toBe(0);
    // Freed on a quorum when the block was left: another engine takes each at once.
    for (const resource of ['stock:1', 'shelf:1', 'election:restock']) {
      const lock = await other.tryAcquire(resource, 10_000);
      expect(lock).not.toBeNull();
      await lock!.release();
    }
  });
});
