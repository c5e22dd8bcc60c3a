export { Redlock } from './redlock.js';
export type { AcquireOptions, TryAcquireOptions, UsingOptions, LockedRoutine } from './lock/acquire-options.js';
export type { LockMode } from './lock/lock-kind.js';
export type { RedlockEngine } from './redlock-engine.js';
export { Lock, type LockSummary, type ReleaseResult } from './lock/lock.js';
export { LockSession } from './acquire/lock-session.js';
export { Election, type CampaignOptions, type ElectionOptions } from './election/election.js';
export { Leadership, type LeadershipEnd } from './election/leadership.js';
export type { LeaderInfo } from './election/leader-records.js';
export type { FreesIn, InspectedKind, LockInspection, MasterInspection } from './inspection/lock-inspection.js';
export type { ForcedRelease, ForcedReleaseOnMaster, QueuedWaiter, QueueListing } from './inspection/operator-scripts.js';
export type { NodeOutcome, NodeStatus } from './base/node-outcome.js';
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
  RoundOperation,
} from './lock/instrumentation.js';
export { type IdentifyBy, type KeyFormat, type RedlockOptions, type RedlockLogger, type WaitOptions } from './lock/redlock-options.js';
export { MAX_TTL_MS } from './base/argument-checks.js';
export {
  RedlockError,
  LockHeldError,
  QuorumError,
  QuorumUnreachableError,
  LockLostError,
  ExtensionLimitError,
  InvalidArgumentError,
  AcquireAbortedError,
  LockKindMismatchError,
  LockUpgradeError,
  PermissionDeniedError,
  type DeniedCommands,
  type RedlockErrorCode,
  type RoundOutcomes,
} from './base/errors.js';
export type { QuarantineNotice } from './voters/restart-quarantine.js';
export type { RestartReason } from './voters/redis-node.js';
export type { DuplicateKind, DuplicateMaster } from './voters/voter-admission.js';
export type { MasterHealth, MastersHealth } from './voters/master-health.js';
export type { RedlockClient } from './voters/clients/clients.js';
export type { NodeRedisClient } from './voters/clients/node-redis-client.js';
