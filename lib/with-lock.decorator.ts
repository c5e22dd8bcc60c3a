import { WITH_LOCK } from './redlock.constants.js';
import type { LockKey, WithLockMetadata, WithLockOptions } from './redlock.interfaces.js';

/**
 * Runs the method holding a Redlock on `key`: acquired before, extended while it runs,
 * released after (also on error). On handlers Nest dispatches (routes, message handlers,
 * gateway handlers, resolvers) `RedlockInterceptor` applies it; on other providers (services,
 * scheduled jobs, queue consumers) `RedlockExplorer` wraps the method at bootstrap.
 *
 * The decorator itself only records metadata on the method, like `SetMetadata`, so its order
 * among `@Get()`, `@UseGuards()` or any other decorator does not matter.
 *
 * @param key - a template such as `'order:{0}'` or `'user:{1.user.id}'` (`{N}`: argument N of
 *   the method, on a handler its Nth parameter as its parameter decorator gives it; then an
 *   optional property path), an array of them, or a function of the arguments.
 * @param ttlOrOptions - the ttl in ms, or options.
 */
export function WithLock(key: LockKey, ttlOrOptions?: number | WithLockOptions): MethodDecorator {
  // Anything but options (an object) or nothing is taken as the ttl, and checked as one at bootstrap:
  // spread, a string such as '5000' would quietly become no options at all.
  const options: WithLockOptions = isOptions(ttlOrOptions) ? { ...ttlOrOptions } : ttlOrOptions === undefined ? {} : { ttlMs: ttlOrOptions };
  const metadata: WithLockMetadata = { key, options };
  return (_target, _propertyKey, descriptor) => {
    Reflect.defineMetadata(WITH_LOCK, metadata, descriptor.value as object);
    return descriptor;
  };
}

function isOptions(value: unknown): value is WithLockOptions {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
