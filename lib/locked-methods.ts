/**
 * Where the locked versions of provider methods live. Each decorated method of a provider
 * instance gets its own locked wrapper, defined on that instance only (another application's
 * instance of the class has its own, on its own engine; an instance made outside Nest has none).
 *
 * That alone would miss callers that took the method before the wrapper existed: the wrappers
 * are made at `onModuleInit`, and @nestjs/schedule (a global module, so its hooks run first)
 * reads `instance[method]` for its `@Interval` / `@Cron` jobs in its own `onModuleInit`. So, as
 * soon as the module is constructed (before any `onModuleInit`), the class's prototype method
 * is replaced by a stand-in that calls the instance's locked wrapper when it has one and the
 * original method otherwise. Its name, length and metadata are the original's.
 */

/** Locked wrappers installed on instances, by any application of this process: never wrap one twice. */
const lockedWrappers = new WeakSet<Function>();
/** Stand-ins installed on prototypes, and the method each stands in for. */
const originals = new WeakMap<Function, Function>();

/** Gives `to` the name, length and every metadata key of `from`. */
export function copyIdentity(from: Function, to: Function): void {
  Object.defineProperty(to, 'name', { value: from.name, configurable: true });
  Object.defineProperty(to, 'length', { value: from.length, configurable: true });
  for (const key of Reflect.getMetadataKeys(from)) {
    Reflect.defineMetadata(key, Reflect.getMetadata(key, from), to);
  }
}

/** Puts the stand-in on the prototype (of `prototype`'s chain) that defines `name`; once per method and process. */
export function installStandIn(prototype: object, name: string): void {
  let host: object | null = prototype;
  while (host && !Object.prototype.hasOwnProperty.call(host, name)) host = Object.getPrototypeOf(host) as object | null;
  const method = host && (host as Record<string, unknown>)[name];
  if (typeof method !== 'function' || originals.has(method)) return;
  const standIn = function (this: unknown, ...args: unknown[]): unknown {
    const own = this !== null && typeof this === 'object' && Object.prototype.hasOwnProperty.call(this, name)
      ? (this as Record<string, unknown>)[name]
      : undefined;
    return (typeof own === 'function' && lockedWrappers.has(own) ? own : method).apply(this, args);
  };
  copyIdentity(method, standIn);
  originals.set(standIn, method);
  Object.defineProperty(host!, name, { value: standIn, writable: true, configurable: true, enumerable: false });
}

/** The method a stand-in stands in for; the method itself otherwise. */
export function originalOf(method: Function): Function {
  return originals.get(method) ?? method;
}

/** True when `method` is a locked wrapper some application installed on an instance. */
export function isLockedWrapper(method: Function): boolean {
  return lockedWrappers.has(method);
}

/** Defines `locked` as the instance's own `name`, where both direct calls and the stand-in find it. */
export function defineLocked(instance: object, name: string, locked: Function): void {
  lockedWrappers.add(locked);
  Object.defineProperty(instance, name, { value: locked, writable: true, configurable: true, enumerable: false });
}
