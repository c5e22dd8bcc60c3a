export * from './core/index.js';
export { RedlockModule } from './redlock.module.js';
export { REDLOCK_ASYNC_OPTIONS_TYPE, REDLOCK_OPTIONS_TYPE, type RedlockModuleExtras } from './redlock.module-definition.js';
export { RedlockService } from './redlock.service.js';
export { WithLock } from './with-lock.decorator.js';
export { RedlockInterceptor } from './redlock.interceptor.js';
export { RedlockExplorer } from './redlock.explorer.js';
export { LockPlanner, type LockPlan } from './lock-plan.js';
export { LockConflictException } from './errors/lock-conflict.exception.js';
export { LockUnavailableException } from './errors/lock-unavailable.exception.js';
export { RedlockExceptionFilter } from './redlock-exception.filter.js';
export { lockHttpException } from './errors/lock-http-exception.js';
export { LockKeyArgumentError } from './errors/lock-key-argument.error.js';
export { LockKeyBadRequestException } from './errors/lock-key-bad-request.exception.js';
export { lockErrorPayload, type LockErrorPayload } from './errors/lock-error-payload.js';
export { RedlockConfigError } from './errors/redlock-config.error.js';
export { RedisConnections } from './redis-connections.js';
export { DEFAULT_TTL_MS, REDLOCK_MODULE_OPTIONS, WITH_LOCK } from './redlock.constants.js';
export type { RedlockSettings } from './module-settings.js';
export type {
  DefaultWait,
  LockKey,
  LockKeyFunction,
  OnLocked,
  RedlockErrorMapper,
  RedlockModuleOptions,
  RedlockNode,
  RedlockOptionsFactory,
  WithLockMetadata,
  WithLockOptions,
} from './redlock.interfaces.js';
