/**
 * A configuration mistake found at bootstrap: bad module options, or a `@WithLock` whose key
 * or options cannot work. Thrown before the application serves anything, so the mistake is
 * fixed in code rather than discovered by the first request. Messages never carry credentials.
 */
export class RedlockConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RedlockConfigError';
  }
}
