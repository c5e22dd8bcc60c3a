// `nestjs-redlock/node-redlock`: node-redlock's (`redlock` on npm, v5) API on this package's
// engine, so that switching is one import (docs/from-node-redlock.md).
export { default, Redlock, type RedlockAbortSignal, type Settings } from './redlock.js';
export { Lock, type LockOwner, type LockSummary } from './lock.js';
export { ExecutionError, ResourceLockedError } from './errors.js';
export type { Client, ClientExecutionResult, ExecutionResult, ExecutionStats } from './types.js';
