import { InvalidArgumentError } from '../core/base/errors.js';

const EXPECTED = 'expected a string, a number, a bigint, a boolean or an object with its own toString()';

/**
 * A call argument that a key template reads cannot form a key: `undefined`, a plain object, an
 * array, NaN. On a decorated handler the argument came from the client, so the interceptor
 * answers 400 Bad Request (or the transport's equivalent) naming the placeholder; on a provider
 * method it is the calling code's mistake and reaches it as this error. A template that names
 * an argument the method does not have is refused at bootstrap instead (`RedlockConfigError`).
 */
export class LockKeyArgumentError extends InvalidArgumentError {
  /**
   * What a client may be told: the template and the placeholder, never the class and method
   * behind them (those are in `message`, for the logs).
   */
  readonly publicMessage: string;

  constructor(
    /** The placeholder as written, `{0.id}`. */
    readonly placeholder: string,
    /** Where the walk along the property path stopped, `{0}` when argument 0 itself was null. */
    readonly walked: string,
    /** The key template the placeholder is in, `'order:{0.id}'`. */
    readonly template: string,
    /** `ClassName.methodName`. */
    readonly site: string,
    value: unknown,
  ) {
    const where = walked === placeholder ? placeholder : `${placeholder} (at ${walked})`;
    super(`${where} in lock key template ${JSON.stringify(template)} of ${site}`, value, EXPECTED);
    this.publicMessage = `invalid ${where} in lock key ${JSON.stringify(template)}: ${kind(value)} (${EXPECTED})`;
  }
}

/** What the value was, without any of its content: it came from a client. */
function kind(value: unknown): string {
  if (value === undefined || value === null || Number.isNaN(value)) return String(value);
  if (Array.isArray(value)) return 'an array';
  const type = typeof value;
  return `${type === 'object' ? 'an' : 'a'} ${type}`;
}
