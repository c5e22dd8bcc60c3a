import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { QuorumUnreachableError, Redlock } from '../../lib/index.js';
import { monotonicNow } from '../../lib/core/base/clock.js';
import { ACQUIRE_SCRIPT } from '../../lib/core/kinds/exclusive/exclusive-scripts.js';
import { TAKES } from '../../lib/core/kinds/exclusive/exclusive-batches.js';
import type { BatchedRequests } from '../../lib/core/voters/redis-node.js';
import { connectMasters, disconnectAll } from '../support/masters.js';
import { RedisFleet } from '../support/redis-fleet.js';

/**
 * A fresh deployment: every master is younger than the restart quarantine window, so no vote
 * counts until the window has passed since they started. Callers that can wait that long wait
 * exactly that long; the others learn at once when to come back.
 */
let fleet: RedisFleet;
const opened: Redis[] = [];
const engines: Redlock[] = [];

beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});

afterEach(async () => {
  for (const engine of engines.splice(0)) engine.close();
  disconnectAll(opened.splice(0));
});

afterAll(async () => {
  await fleet?.stopAll();
});

async function engine(restartQuarantineMs: number): Promise<Redlock> {
  const clients = await connectMasters(fleet.urls());
  opened.push(...clients);
  const redlock = new Redlock(clients, { logger: { warn: () => {} }, restartQuarantineMs, nodeTimeoutMs: 5_000 });
  engines.push(redlock);
  await redlock.verifyMasters();
  return redlock;
}

/** When, on this process's monotonic clock, the youngest master of the fleet is `windowMs` old. */
function quarantineEnd(redlock: Redlock, windowMs: number): number {
  return Math.max(...redlock.nodes.map((node) => node.startedAt!)) + windowMs;
}

describe('restart quarantine on a fresh deployment', () => {
  it('fails a caller that will not wait at once, naming the masters, until when, and when to retry', async () => {
    const redlock = await engine(600_000);
    const error = await redlock.acquire('order:1', 5_000, { retryCount: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnreachableError);
    const unreachable = error as QuorumUnreachableError;
    // All three are young: the second to come of age makes the quorum of two.
    expect(unreachable.retryAfterMs).toBeGreaterThan(590_000);
    expect(unreachable.retryAfterMs).toBeLessThanOrEqual(600_000);
    const quarantined = unreachable.nodes.filter((node) => node.status === 'quarantined');
    expect(quarantined.length).toBeGreaterThanOrEqual(2);
    for (const node of quarantined) {
      expect(unreachable.message).toContain(`${node.node} for ${node.quarantinedForMs} ms`);
    }
    expect(unreachable.message).toMatch(
      new RegExp(`a quorum can vote again in ${unreachable.retryAfterMs} ms, at \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z`),
    );
  });

  it('does not spend a wait budget that ends before the quarantine does', async () => {
    const redlock = await engine(600_000);
    // The budget (60 s) is longer than this test may run: only failing at once passes.
    const error = await redlock.acquire('order:2', 5_000, { waitTimeoutMs: 60_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnreachableError);
    expect((error as QuorumUnreachableError).retryAfterMs).toBeGreaterThan(60_000);
  });

  it('waits exactly until the quarantine ends when the budget allows: one round before, one after', async () => {
    // Long enough that a starved machine still asks its first round inside the window.
    const windowMs = 3_000;
    const redlock = await engine(windowMs);
    // Master 0 older than the window, masters 1 and 2 restarted (new run_id): only master 0 votes.
    await expect.poll(() => redlock.nodes.every((node) => node.uptimeMs()! > windowMs), { timeout: 10_000 }).toBe(true);
    await Promise.all([fleet.restart(1), fleet.restart(2)]);
    const fresh = await engine(windowMs);
    const asked: number[] = [];
    const old = fresh.nodes[0]!;
    const batched = old.batched.bind(old);
    const run = old.run.bind(old);
    old.batched = <Item, Result>(requests: BatchedRequests<Item, Result>, item: Item) => (
      (requests as unknown) === TAKES && asked.push(monotonicNow()), batched(requests, item)
    );
    // Releases run scripts too: only the acquire script is a request for a vote.
    old.run = (script, ...rest) => (script === ACQUIRE_SCRIPT && asked.push(monotonicNow()), run(script, ...rest));

    // Pauses of 1 ms: a caller that polled would ask master 0 hundreds of times before the end.
    const lock = await fresh.acquire('order:3', 5_000, { waitTimeoutMs: 10_000, retryDelayMs: 1, retryJitterMs: 0 });
    await lock.release();
    expect(asked).toHaveLength(2);
    // The second round went out once the first restarted master had come of age, not before.
    const firstOfAge = Math.min(...fresh.nodes.slice(1).map((node) => node.startedAt!)) + windowMs;
    expect(asked[1]).toBeGreaterThanOrEqual(firstOfAge - 1);
  });
});
