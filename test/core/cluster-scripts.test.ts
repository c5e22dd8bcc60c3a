import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '../../lib/core/base/errors.js';
import { forCluster, merge, split, undoCall, unwrap } from '../../lib/core/voters/cluster-scripts.js';
import { KeyNames } from '../../lib/core/rounds/key-names.js';
import { keySlot } from '../../lib/core/base/key-slot.js';
import { ACQUIRE_SCRIPT } from '../../lib/core/kinds/exclusive/exclusive-scripts.js';
import { SHARED_ACQUIRE_SCRIPT, SHARED_EXTEND_SCRIPT, SHARED_FENCE_SCRIPT, SHARED_RELEASE_SCRIPT } from '../../lib/core/kinds/shared/shared-scripts.js';

// How a Redis Cluster voter cuts the shared holders' scripts by hash slot and puts their replies
// together, without a cluster (test/cluster/cluster-shared-holds.test.ts runs them on one).

const PREFIXES = { keyPrefix: 'redlock:', queueKeyPrefix: 'redlock-queue:', fenceKeyPrefix: 'redlock-fence:', holdersKeyPrefix: 'redlock-holders:', leaderKeyPrefix: 'redlock-leader:' };
const names = new KeyNames(PREFIXES, true);

/** Three resources: a and c in one slot, b in another. */
const a = 'res:a';
const b = (() => {
  for (let i = 0; ; i++) if (keySlot(`{res:${i}}`) !== keySlot(`{${a}}`)) return `res:${i}`;
})();
const c = (() => {
  for (let i = 0; ; i++) if (keySlot(`{res:c${i}}`) === keySlot(`{${a}}`)) return `res:c${i}`;
})();
const resources = [a, b, c];
const locks = resources.map((r) => names.lock(r));
const queues = resources.map((r) => names.queue(r));
const holders = resources.map((r) => names.holders(r));
const fences = resources.map((r) => names.fence(r));

describe('KeyNames with a Cluster voter', () => {
  it("puts every name of a resource in one hash slot, whatever the resource's braces", () => {
    for (const resource of ['order:1', 'a{b}c', 'x}y', '{}', '{', 'é{ü}']) {
      const all = [names.lock(resource), names.queue(resource), names.holders(resource), names.fence(resource)];
      expect(new Set(all.map(keySlot)).size).toBe(1);
    }
  });

  it("refuses a resource that begins with '}', whose tag would be empty", () => {
    expect(() => names.lock('}x')).toThrow(InvalidArgumentError);
    expect(new KeyNames(PREFIXES, false).lock('}x')).toBe('redlock:}x');
  });

  it('takes prefixes that carry one and the same hash tag, and refuses prefixes whose tags differ', () => {
    const tagged = new KeyNames({ keyPrefix: '{app}l:', queueKeyPrefix: '{app}q:', fenceKeyPrefix: '{app}f:', holdersKeyPrefix: '{app}h:', leaderKeyPrefix: '{app}e:' }, true);
    expect(new Set([tagged.lock('}x'), tagged.holders('y'), tagged.queue('z')].map(keySlot)).size).toBe(1);
    expect(() => new KeyNames({ ...PREFIXES, holdersKeyPrefix: '{h}:' }, true)).toThrow(/holdersKeyPrefix/);
    expect(() => new KeyNames({ ...PREFIXES, keyPrefix: 'a{}:', queueKeyPrefix: 'a{}q:', fenceKeyPrefix: 'a{}f:', holdersKeyPrefix: 'a{}h:', leaderKeyPrefix: 'a{}e:' }, true)).toThrow(InvalidArgumentError);
    // Without a Cluster voter, braces are only characters.
    expect(new KeyNames({ ...PREFIXES, holdersKeyPrefix: '{h}:' }, false).holders('x')).toBe('{h}:x');
  });
});

describe('shared holders scripts, split by hash slot', () => {
  it('cuts an acquire into one script per slot, with its keys, count and preferred slots', () => {
    const args = ['tok', 5_000, 3, 'w1', 7, '*s2', 2, 1, 'p0', 'p1', 'p2'];
    const calls = split(SHARED_ACQUIRE_SCRIPT, [...locks, ...queues, ...holders, ...fences], args);
    expect(calls).toHaveLength(2);
    const [ac, bOnly] = calls;
    expect(ac!.indexes).toEqual([0, 2]);
    expect(ac!.keys).toEqual([locks[0], locks[2], queues[0], queues[2], holders[0], holders[2], fences[0], fences[2]]);
    expect(ac!.args).toEqual(['tok', 5_000, 2, 'w1', 7, '*s2', 2, 1, 'p0', 'p2']);
    expect(bOnly!.keys).toEqual([locks[1], queues[1], holders[1], fences[1]]);
    expect(bOnly!.args).toEqual(['tok', 5_000, 1, 'w1', 7, '*s2', 2, 1, 'p1']);
    for (const call of calls) expect(new Set(call.keys.map(keySlot))).toEqual(new Set([call.slot]));
  });

  it('cuts extend, fence write-back and release alike, each with its per-resource slots', () => {
    const extend = split(SHARED_EXTEND_SCRIPT, [...locks, ...holders], ['tok', 5_000, '*s2', '0', '1', '0']);
    expect(extend.map((call) => [call.keys, call.args])).toEqual([
      [[locks[0], locks[2], holders[0], holders[2]], ['tok', 5_000, '*s2', '0', '0']],
      [[locks[1], holders[1]], ['tok', 5_000, '*s2', '1']],
    ]);
    const fence = split(SHARED_FENCE_SCRIPT, [...locks, ...queues, ...holders, ...fences], ['tok', 42, 3, 0, '*r', 'r', 'r', 'r']);
    expect(fence.map((call) => call.args)).toEqual([
      ['tok', 42, 2, 0, '*r', 'r', 'r'],
      ['tok', 42, 1, 0, '*r', 'r'],
    ]);
    const release = split(SHARED_RELEASE_SCRIPT, [...locks, ...queues, ...holders], ['tok', 'w1', '*s2', 2, '0', '1', '']);
    expect(release.map((call) => [call.keys, call.args])).toEqual([
      [[locks[0], locks[2], queues[0], queues[2], holders[0], holders[2]], ['tok', 'w1', '*s2', 2, '0', '']],
      [[locks[1], queues[1], holders[1]], ['tok', 'w1', '*s2', 2, '1']],
    ]);
  });

  it("puts a grant together in the request's order, and undoes the slots that granted when another did not", () => {
    const calls = split(SHARED_ACQUIRE_SCRIPT, [...locks, ...queues, ...holders], ['tok', 5_000, 3, '', 1, '*s2', 2, 1, '', '', '']);
    // Slot of a and c: a gets 1 (0 taken), c gets 0; slot of b: b gets 0.
    const grantAC = [1, 3, '1', '0', '1', '0,1'];
    const grantB = [1, 5, '0', '0,1'];
    expect(merge(SHARED_ACQUIRE_SCRIPT, calls, [grantAC, grantB])).toEqual({ reply: [1, 5, '1', '0', '0', '1', '0,1', '0,1'], undo: [] });
    const refused = merge(SHARED_ACQUIRE_SCRIPT, calls, [grantAC, [0, 250]]);
    expect(refused).toEqual({ reply: [0, 250], undo: [calls[0]] });
    const mismatch = merge(SHARED_ACQUIRE_SCRIPT, calls, [[2, 2, 'lock'], grantB]);
    expect(mismatch).toEqual({ reply: [2, 3, 'lock'], undo: [calls[1]] });
    // The undo: our entry out of the holders hashes of a and c, nothing else.
    expect(undoCall(SHARED_ACQUIRE_SCRIPT, calls[0]!)).toEqual({
      script: SHARED_RELEASE_SCRIPT,
      keys: [locks[0], locks[2], queues[0], queues[2], holders[0], holders[2]],
      args: ['tok', '', '*s2', 2, '', ''],
    });
    expect(undoCall(SHARED_RELEASE_SCRIPT, calls[0]!)).toBeUndefined();
  });

  it("names a kind mismatch of a lock's acquire by the resource's index in the whole request", () => {
    const calls = split(ACQUIRE_SCRIPT, [...locks, ...queues], ['tok', 5_000, 3, '', 1, 1_000]);
    expect(merge(ACQUIRE_SCRIPT, calls, [[1, 0], [2, 1, '*s2']])).toEqual({ reply: [2, 2, '*s2'], undo: [calls[0]] });
  });

  it('counts an extension or a write-back only where every slot succeeded, and sums a release', () => {
    const calls = split(SHARED_EXTEND_SCRIPT, [...locks, ...holders], ['tok', 5_000, '*r', 'r', 'r', 'r']);
    expect(merge(SHARED_EXTEND_SCRIPT, calls, [1, 1]).reply).toBe(1);
    expect(merge(SHARED_EXTEND_SCRIPT, calls, [1, 0]).reply).toBe(0);
    expect(merge(SHARED_FENCE_SCRIPT, calls, [0, 1]).reply).toBe(0);
    expect(merge(SHARED_RELEASE_SCRIPT, calls, [2, 1]).reply).toBe(3);
  });

  it('has every vote of readers and permits say which server ran it; a release need not', () => {
    for (const script of [SHARED_ACQUIRE_SCRIPT, SHARED_EXTEND_SCRIPT, SHARED_FENCE_SCRIPT]) {
      expect(forCluster(script).source).toContain("redis.call('INFO', 'server')");
      const who = ['f'.repeat(40), 120, 'e'.repeat(40), -1];
      expect(unwrap(script, [1, who])).toEqual({ reply: 1, shard: { runId: who[0], uptimeMs: 120_000, term: `${who[0]}/${who[2]}`, promoted: false } });
      // A promoted server keeps the offset its old replication id ended at; a server without the field never says so.
      expect(unwrap(script, [1, [...who.slice(0, 3), 5_000]]).shard?.promoted).toBe(true);
      expect(unwrap(script, [1, who.slice(0, 3)]).shard?.promoted).toBe(false);
    }
    expect(forCluster(SHARED_RELEASE_SCRIPT)).toBe(SHARED_RELEASE_SCRIPT);
  });
});
