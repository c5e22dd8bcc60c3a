import type { WorkerConfig } from './protocol.js';

/** What one cycle of a worker asks for: the lock (fenced or not), a permit, a reader or a writer. */
export interface CycleShape {
  readonly mode?: 'read' | 'write';
  readonly limit?: number;
  /** With `limit`: how many permits the cycle takes (a weighted permit). */
  readonly permits?: number;
  /** False for a lock without a fencing token; fenced otherwise. */
  readonly fencing?: boolean;
}

/**
 * How often a plain lock's or a reader's cycle goes without a fencing token. A fenced hold always
 * takes its own rounds, so without these the suite would never see a lock handed over within a
 * process or granted by a release (server-side hand-off), nor readers of a process sharing a
 * hold; the store's fenced counter skips them.
 */
const UNFENCED_SHARE = 0.5;

/** A cycle's shape under `config.shared`: every acquire a permit, or a reader with `readShare` odds, else a writer; for the lock, fenced or not. */
export function cycleShape(shared: WorkerConfig['shared']): CycleShape {
  if (shared?.limit !== undefined) {
    const { permits } = shared;
    return permits ? { limit: shared.limit, permits: permits[Math.floor(Math.random() * permits.length)]! } : { limit: shared.limit };
  }
  // Readers unfenced as often as the lock: only those share a hold within a process.
  if (shared?.readShare !== undefined) return Math.random() < shared.readShare ? { mode: 'read', ...unfencedAtTimes() } : { mode: 'write' };
  return unfencedAtTimes();
}

function unfencedAtTimes(): CycleShape {
  return Math.random() < UNFENCED_SHARE ? { fencing: false } : {};
}

/** Readers and permits share the resource: they hold without touching the store, which assumes one holder. */
export function sharesResource(shape: CycleShape): boolean {
  return shape.mode === 'read' || (shape.limit ?? 1) > 1;
}
