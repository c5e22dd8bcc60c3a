export { Redlock, type AcquireOptions, type UsingOptions, type LockedRoutine } from './redlock.js';
export type { LockMode } from './lock-kind.js';
export type { RedlockEngine } from './redlock-engine.js';
export { Lock, type ReleaseResult } from './lock.js';
export { autoExtend } from './auto-extender.js';
export { currentScope, LockSession, type LockScope } from './lock-session.js';
export type { NodeOutcome, NodeStatus } from './node-outcome.js';
export type {
  AcquireObserver,
  AcquireOutcome,
  CallObserver,
  CallOutcome,
  ExtensionOutcome,
  LostReason,
  MasterAddress,
  MasterFailure,
  MasterOperation,
  RedlockInstrumentation,
} from './instrumentation.js';
export { type RedlockOptions, type RedlockLogger, type WaitOptions } from './redlock-options.js';
export { MAX_TTL_MS } from './argument-checks.js';
export {
  RedlockError,
  LockHeldError,
  QuorumUnreachableError,
  LockLostError,
  ExtensionLimitError,
  InvalidArgumentError,
  AcquireAbortedError,
  LockKindMismatchError,
  LockUpgradeError,
  type RedlockErrorCode,
} from './errors.js';
export type { QuarantineNotice } from './restart-quarantine.js';
export type { DuplicateKind, DuplicateMaster } from './voter-admission.js';
export type { MasterHealth, MastersHealth } from './master-health.js';
export { nextFence } from './fence.js';
