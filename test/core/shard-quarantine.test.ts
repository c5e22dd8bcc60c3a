import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { QuarantineNotice } from '../../lib/core/index.js';
import { NodeQuarantinedError } from '../../lib/core/voters/redis-node.js';
import { ShardQuarantine } from '../../lib/core/voters/shard-quarantine.js';
import type { ShardIdentity } from '../../lib/core/voters/cluster-scripts.js';

// The judge of a Redis Cluster voter's replies, on its own: which server answered for which slot,
// on a clock the test moves. What a real cluster does to it is in test/cluster/.

const WINDOW = 10_000;
const shard = (id: string, uptimeMs: number, replId = '1'.repeat(40), promoted = false): ShardIdentity => ({
  runId: id.repeat(40),
  uptimeMs,
  term: `${id.repeat(40)}/${replId}`,
  promoted,
});
const A = shard('a', 60_000);
const B = shard('b', 60_000);

let notices: QuarantineNotice[];
let shards: ShardQuarantine;

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['performance'] });
  notices = [];
  shards = new ShardQuarantine('cluster:127.0.0.1:7000', () => WINDOW, (notice) => notices.push(notice));
  shards.learn([{ from: 1, to: 3, shard: A }]);
});

afterEach(() => {
  vi.useRealTimers();
});

describe('ShardQuarantine', () => {
  it('counts the votes of the servers it learnt, when they are older than the window', () => {
    expect(shards.judge(A, 1)).toBeUndefined();
    expect(shards.longestMs()).toBeUndefined();
    expect(notices).toEqual([]);
  });

  it('holds back a slot taken over by another server for the whole window, per slot, with one notice per takeover', () => {
    expect(shards.judge(B, 1)).toBeInstanceOf(NodeQuarantinedError);
    vi.advanceTimersByTime(6_000);
    // Slot 2 is first seen taken over now: its own window starts now, and slot 1's is not pushed back.
    expect(shards.judge(B, 2)).toBeInstanceOf(NodeQuarantinedError);
    expect(notices).toEqual([{ node: `cluster:127.0.0.1:7000 (shard ${B.runId.slice(0, 12)})`, reason: 'run_id changed', remainingMs: WINDOW }]);
    expect(shards.longestMs()).toBe(WINDOW);
    vi.advanceTimersByTime(4_001);
    expect(shards.judge(B, 1)).toBeUndefined();
    expect((shards.judge(B, 2) as NodeQuarantinedError).remainingMs).toBeCloseTo(WINDOW - 4_001, 0);
    vi.advanceTimersByTime(6_000);
    expect(shards.judge(B, 2)).toBeUndefined();
    expect(shards.longestMs()).toBeUndefined();
    // A slot never asked about since the takeover still counts as A's: taken over when first seen.
    expect(shards.judge(B, 3)).toBeInstanceOf(NodeQuarantinedError);
  });

  it('holds back every vote of a server up for less than the window, and says so once', () => {
    const young = shard('c', 1_000);
    shards.learn([{ from: 4, to: 4, shard: young }]);
    const refusal = shards.judge(young, 4);
    expect(refusal).toBeInstanceOf(NodeQuarantinedError);
    expect((refusal as NodeQuarantinedError).remainingMs).toBe(WINDOW - 1_000);
    expect(notices).toEqual([expect.objectContaining({ reason: 'recent start', remainingMs: WINDOW - 1_000 })]);
    expect(shards.longestMs()).toBe(WINDOW - 1_000);
    vi.advanceTimersByTime(WINDOW - 1_000);
    expect(shards.judge(young, 4)).toBeUndefined();
    expect(notices).toHaveLength(1);
  });

  it('holds back a slot that failed over and back to the same server: same run_id, new replication id', () => {
    expect(shards.judge(A, 1)).toBeUndefined();
    // A was demoted and promoted again without restarting: a promotion starts a new replication id.
    const againA = { ...A, term: `${A.runId}/${'2'.repeat(40)}` };
    expect(shards.judge(againA, 1)).toBeInstanceOf(NodeQuarantinedError);
    expect(notices).toEqual([expect.objectContaining({ reason: 'run_id changed', node: `cluster:127.0.0.1:7000 (shard ${A.runId.slice(0, 12)})` })]);
    vi.advanceTimersByTime(WINDOW);
    expect(shards.judge(againA, 1)).toBeUndefined();
  });

  it('holds back a server already promoted when first seen, for the window from then, whatever its uptime', () => {
    // A failover before this engine read the slot map: when the replica took over is unknown.
    const promoted = shard('d', 600_000, '3'.repeat(40), true);
    shards.learn([{ from: 5, to: 5, shard: promoted }]);
    expect(notices).toEqual([expect.objectContaining({ reason: 'promoted replica', remainingMs: WINDOW })]);
    expect(shards.judge(promoted, 5)).toBeInstanceOf(NodeQuarantinedError);
    expect(shards.judge(A, 1)).toBeUndefined(); // the other shards vote meanwhile
    vi.advanceTimersByTime(WINDOW);
    expect(shards.judge(promoted, 5)).toBeUndefined();
    // A promoted server taking over a slot this engine saw another own: one notice, the takeover's.
    const successor = shard('e', 600_000, '4'.repeat(40), true);
    expect(shards.judge(successor, 1)).toBeInstanceOf(NodeQuarantinedError);
    expect(notices.slice(1).map((notice) => notice.reason)).toEqual(['run_id changed']);
  });

  it('trusts young shard masters at first sight when asked to, and still holds back a takeover it sees', () => {
    const trusting = new ShardQuarantine('cluster:127.0.0.1:7000', () => WINDOW, (notice) => notices.push(notice), false);
    const young = shard('c', 1_000);
    trusting.learn([{ from: 1, to: 2, shard: young }]);
    expect(trusting.judge(young, 1)).toBeUndefined();
    expect(trusting.longestMs()).toBeUndefined();
    expect(notices).toEqual([]);
    // The same young server by default: quarantined for the rest of the window.
    expect(shards.judge(young, 9)).toBeInstanceOf(NodeQuarantinedError);
    notices.length = 0;
    // Restarted behind the same slots (a new run_id): a takeover, waited out in full.
    const restarted = shard('d', 0);
    expect(trusting.judge(restarted, 1)).toBeInstanceOf(NodeQuarantinedError);
    expect(notices.map((notice) => notice.reason)).toEqual(['run_id changed']);
    // A replica already promoted when first seen is not trusted either.
    expect(trusting.judge(shard('e', 60_000, '2'.repeat(40), true), 5)).toBeInstanceOf(NodeQuarantinedError);
  });
});
