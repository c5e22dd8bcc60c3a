import type { WorkerConfig } from './protocol.js';

/** What one cycle of a worker asks for: nothing beyond the lock, a permit, a reader or a writer. */
export interface CycleShape {
  readonly mode?: 'read' | 'write';
  readonly limit?: number;
}

/** A cycle's shape under `config.shared`: every acquire a permit, or a reader with `readShare` odds, else a writer. */
export function cycleShape(shared: WorkerConfig['shared']): CycleShape {
  if (shared?.limit !== undefined) return { limit: shared.limit };
  if (shared?.readShare !== undefined) return Math.random() < shared.readShare ? { mode: 'read' } : { mode: 'write' };
  return {};
}

/** Readers and permits share the resource: they hold without touching the store, which assumes one holder. */
export function sharesResource(shape: CycleShape): boolean {
  return shape.mode === 'read' || (shape.limit ?? 1) > 1;
}
