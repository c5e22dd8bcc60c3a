// The root entry: the Nest module and what a Nest app touches. Every name here is a promise to
// keep (api/nestjs-redlock.api.md lists them); the module's own machinery (explorer, planner,
// connections, settings) stays internal. The engine's public names come through its own entry,
// so `nestjs-redlock` and `nestjs-redlock/core` name the same classes.
export { RedlockModule } from './redlock.module.js';
export type { RedlockModuleAsyncOptions, RedlockModuleExtras } from './redlock.module-definition.js';
export { RedlockService } from './redlock.service.js';
export { WithLock } from './with-lock.decorator.js';
export { WhileLeader } from './while-leader.decorator.js';
export { LeadershipService, type LeadershipChange } from './leadership.service.js';
export { RedlockInterceptor } from './redlock.interceptor.js';
export { RedlockExceptionFilter } from './redlock-exception.filter.js';
export { LockConflictException } from './errors/lock-conflict.exception.js';
export { LockUnavailableException } from './errors/lock-unavailable.exception.js';
export { lockHttpException } from './errors/lock-http-exception.js';
export { LockKeyArgumentError } from './errors/lock-key-argument.error.js';
export { LockKeyBadRequestException } from './errors/lock-key-bad-request.exception.js';
export { lockErrorPayload, type LockErrorPayload } from './errors/lock-error-payload.js';
export { RedlockConfigError } from './errors/redlock-config.error.js';
export { DEFAULT_TTL_MS } from './redlock.constants.js';
export type {
  DefaultWait,
  LeadershipOptions,
  LockKey,
  LockKeyFunction,
  OnLocked,
  RedlockClientLibrary,
  RedlockErrorMapper,
  RedlockModuleOptions,
  RedlockNode,
  RedlockOptionsFactory,
  WithLockOptions,
} from './redlock.interfaces.js';
export {
  AcquireAbortedError,
  Election,
  ExtensionLimitError,
  InvalidArgumentError,
  Leadership,
  Lock,
  LockHeldError,
  LockKindMismatchError,
  LockLostError,
  LockSession,
  LockUpgradeError,
  MAX_TTL_MS,
  PermissionDeniedError,
  QuorumError,
  QuorumUnreachableError,
  Redlock,
  RedlockError,
  type AcquireObserver,
  type AcquireOptions,
  type TryAcquireOptions,
  type AcquireOutcome,
  type CallObserver,
  type CallOutcome,
  type CampaignOptions,
  type DeniedCommands,
  type DuplicateKind,
  type DuplicateMaster,
  type ElectionOptions,
  type ExtensionOutcome,
  type FreesIn,
  type InspectedKind,
  type IdentifyBy,
  type KeyFormat,
  type LeaderInfo,
  type LeadershipEnd,
  type LockedRoutine,
  type LockInspection,
  type LockMode,
  type LockSummary,
  type LostReason,
  type MasterAddress,
  type MasterFailure,
  type MasterHealth,
  type MasterInspection,
  type MasterOperation,
  type MastersHealth,
  type NodeRedisClient,
  type NodeOutcome,
  type NodeStatus,
  type QuarantineNotice,
  type RestartReason,
  type RedlockClient,
  type RedlockEngine,
  type RedlockErrorCode,
  type RedlockInstrumentation,
  type RedlockLogger,
  type RedlockOptions,
  type ReleaseResult,
  type RoundOperation,
  type RoundOutcomes,
  type UsingOptions,
  type WaitOptions,
} from './core/index.js';
