import type { Lock, Redlock } from '../../../lib/core/index.js';
import type { CycleShape } from './cycle-shape.js';
import { now, nsFromMs } from './history.js';
import type { SafetyRun } from './safety-run.js';

/**
 * A lock holder that lives in the test process itself, for scenarios that need one holder under
 * exact control (when it acquires, what happens while it holds). It records into the run's
 * history exactly as a worker process does, so the checker treats it like any other holder.
 */
export class LocalHolder {
  #ops = 0;

  constructor(
    private readonly run: SafetyRun,
    private readonly redlock: Redlock,
    readonly proc: string,
  ) {}

  /** The lock itself, or with `shape` a writer (`mode: 'write'`) or a permit (`limit`). */
  async acquire(resource: string, ttl: number, waitTimeoutMs: number, shape: CycleShape = {}): Promise<Lock> {
    const id = `${this.proc}:${++this.#ops}`;
    this.#record({ op: 'acquire', phase: 'invoke', id, resource, ttl });
    try {
      const lock = await this.redlock.acquire(resource, ttl, { ...shape, fencing: true, waitTimeoutMs });
      const remaining = lock.remainingMs();
      this.#record({
        op: 'acquire',
        phase: 'ok',
        id,
        resource,
        ttl,
        token: lock.token,
        fence: lock.fence,
        validUntil: now() + nsFromMs(remaining),
        driftFactor: this.redlock.options.driftFactor,
        ...(lock.mode === 'read' ? { mode: 'read' as const } : {}),
        ...(lock.limit > 1 ? { limit: lock.limit } : {}),
      });
      return lock;
    } catch (error) {
      this.#record({ op: 'acquire', phase: 'fail', id, resource, code: (error as { code?: string }).code ?? 'Error' });
      throw error;
    }
  }

  read(lock: Lock): { accepted: boolean; value: number; plain: number } {
    return this.#store(lock, 'read');
  }

  /** Writes the fenced value, and the unfenced one only while the lock has `marginMs` left. */
  write(lock: Lock, read: { value: number; plain: number }, marginMs: number): { accepted: boolean } {
    const trusted = lock.remainingMs() > marginMs;
    return this.#store(lock, 'write', { value: read.value + 1, ...(trusted ? { plain: read.plain + 1 } : {}) });
  }

  async release(lock: Lock): Promise<void> {
    const base = { resource: lock.resources[0]!, token: lock.token };
    this.#record({ op: 'release', phase: 'invoke', ...base });
    const result = await lock.release();
    this.#record({ op: 'release', phase: 'ok', ...base, releasedOn: result.releasedOn, heldUntilRelease: result.heldUntilRelease });
  }

  #store(lock: Lock, op: 'read' | 'write', values: { value?: number; plain?: number } = {}) {
    const resource = lock.resources[0]!;
    const base = { resource, token: lock.token, fence: lock.fence };
    this.#record({ op, phase: 'invoke', ...base, ...values });
    const reply = this.run.store.apply({ op, resource, fence: lock.fence!, token: lock.token, proc: this.proc, worker: 0, ...values });
    this.#record({ op, phase: reply.accepted ? 'ok' : 'fail', ...base, seq: reply.seq, value: reply.value, plain: reply.plain });
    return reply;
  }

  #record(event: Omit<Parameters<SafetyRun['history']['record']>[0], 'proc' | 'worker' | 't'>): void {
    const recorded = { proc: this.proc, worker: 0, t: now(), ...event };
    this.run.history.record(recorded);
    this.run.noteHolds([recorded]);
  }
}
