/** Injection token of the options given to `RedlockModule.forRoot` / `forRootAsync`. */
export const REDLOCK_MODULE_OPTIONS = Symbol('REDLOCK_MODULE_OPTIONS');

/** @internal The validated options, with defaults filled in. */
export const REDLOCK_SETTINGS = Symbol('REDLOCK_SETTINGS');

/** Metadata key under which `@WithLock` stores its arguments on the method. */
export const WITH_LOCK = 'redlock:with-lock';

/**
 * Default ttl of locks taken by `@WithLock` and by `RedlockService` calls that omit one.
 * Auto-extension keeps a lock alive for as long as the work runs, so the ttl only bounds how
 * long a crashed holder blocks everyone else: short enough to recover fast, long enough that
 * extension rounds (at half the ttl) stay rare.
 */
export const DEFAULT_TTL_MS = 10_000;

/** Metadata key under which `@WhileLeader` stores its election's name on the method. */
export const WHILE_LEADER = 'redlock:while-leader';
