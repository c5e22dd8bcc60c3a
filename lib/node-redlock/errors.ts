import type { ExecutionStats } from './types.js';

/** A master refused because another lock holds one or more of the requested resources (node-redlock's). */
export class ResourceLockedError extends Error {
  constructor(
    /** Which share of the resources the operation was applied to. */
    public override readonly message: string,
  ) {
    super();
    this.name = 'ResourceLockedError';
  }
}

/** An operation did not reach a quorum within its retry window (node-redlock's). */
export class ExecutionError extends Error {
  constructor(
    /** What went wrong. */
    public override readonly message: string,
    /** Per round, oldest first, what the masters voted. */
    public readonly attempts: ReadonlyArray<Promise<ExecutionStats>>,
  ) {
    super();
    this.name = 'ExecutionError';
  }
}
