import { InvalidArgumentError } from './core/base/errors.js';
import { LockKeyArgumentError } from './errors/lock-key-argument.error.js';
import type { LockKey, LockKeyFunction } from './redlock.interfaces.js';
import { RedlockConfigError } from './errors/redlock-config.error.js';

/** The decorated method a key belongs to, for messages and for checking argument positions. */
export interface KeySite {
  /** `ClassName.methodName`. */
  readonly name: string;
  /** Parameters the method declares; a placeholder past them can never be filled. */
  readonly paramCount: number;
}

/** A key, checked once at bootstrap, that turns call arguments into resource names. */
export interface CompiledLockKey {
  /** Argument positions the key reads, so a caller can skip producing others; undefined: all (a key function). */
  readonly argIndexes: readonly number[] | undefined;
  /**
   * The resources to lock for these arguments. Throws rather than lock "undefined": a
   * LockKeyArgumentError for an argument a template cannot use, an InvalidArgumentError for
   * what a key function returns.
   */
  resolve(args: readonly unknown[]): string[];
}

type Part = string | Placeholder;

interface Placeholder {
  readonly index: number;
  readonly path: readonly string[];
  /** As written, `{0.id}`, for messages. */
  readonly source: string;
}

const PLACEHOLDER = /^(\d+)((?:\.(?:[A-Za-z_$][\w$]*|\d+))*)$/;

/**
 * Compiles a `@WithLock` key. Templates: `{N}` is argument N, `{N.a.b}` a property path into
 * it, `{{` and `}}` literal braces. Throws RedlockConfigError naming the method and template
 * for a syntax error or a placeholder past the method's parameters.
 */
export function compileLockKey(key: LockKey, site: KeySite): CompiledLockKey {
  if (typeof key === 'function') return compileFunction(key, site);
  if (typeof key === 'string') return compileTemplates([key], site);
  if (Array.isArray(key) && key.length > 0) return compileTemplates(key, site);
  throw new RedlockConfigError(
    `@WithLock on ${site.name}: the key must be a template string, a non-empty array of them, or a function of the arguments`,
  );
}

function compileTemplates(templates: readonly unknown[], site: KeySite): CompiledLockKey {
  const compiled = templates.map((template) => {
    if (typeof template !== 'string') {
      throw new RedlockConfigError(`@WithLock on ${site.name}: every key template must be a string (got ${typeof template})`);
    }
    return { template, parts: parseTemplate(template, site) };
  });
  const argIndexes = [
    ...new Set(compiled.flatMap(({ parts }) => parts.filter(isPlaceholder).map((p) => p.index))),
  ].sort((a, b) => a - b);
  return {
    argIndexes,
    resolve: (args) =>
      compiled.map(({ template, parts }) =>
        parts.map((part) => (typeof part === 'string' ? part : fill(part, args, template, site))).join(''),
      ),
  };
}

function compileFunction(fn: LockKeyFunction, site: KeySite): CompiledLockKey {
  return {
    argIndexes: undefined,
    resolve: (args) => {
      const result: unknown = fn(...args);
      const list = typeof result === 'string' ? [result] : result;
      const valid =
        Array.isArray(list) && list.length > 0 && list.every((item) => typeof item === 'string' && item.length > 0);
      if (!valid) {
        throw new InvalidArgumentError(
          `lock key function of ${site.name}`,
          result,
          'expected a non-empty string or a non-empty array of them',
        );
      }
      return list as string[];
    },
  };
}

function parseTemplate(template: string, site: KeySite): Part[] {
  const fail = (why: string): never => {
    throw new RedlockConfigError(`@WithLock on ${site.name}: lock key template ${JSON.stringify(template)} ${why}`);
  };
  if (template.length === 0) fail('is empty');
  const parts: Part[] = [];
  let literal = '';
  for (let i = 0; i < template.length; i++) {
    const char = template[i];
    if ((char === '{' || char === '}') && template[i + 1] === char) {
      literal += char;
      i++;
    } else if (char === '}') {
      fail(`has an unmatched "}" at position ${i} (write "}}" for a literal brace)`);
    } else if (char === '{') {
      const end = template.indexOf('}', i);
      if (end < 0) fail(`has an unclosed "{" at position ${i} (write "{{" for a literal brace)`);
      const source = template.slice(i, end + 1);
      const match = PLACEHOLDER.exec(source.slice(1, -1));
      if (!match) fail(`has an invalid placeholder ${source}: expected {N} or {N.property.path}, N an argument position`);
      const index = Number(match![1]);
      if (index >= site.paramCount) {
        fail(
          `reads argument ${index} in ${source}, but ${site.name} declares ` +
            `${site.paramCount} parameter${site.paramCount === 1 ? '' : 's'}`,
        );
      }
      if (literal) parts.push(literal);
      literal = '';
      parts.push({ index, path: match![2] ? match![2].slice(1).split('.') : [], source });
      i = end;
    } else {
      literal += char;
    }
  }
  if (literal) parts.push(literal);
  return parts;
}

function isPlaceholder(part: Part): part is Placeholder {
  return typeof part !== 'string';
}

function fill(placeholder: Placeholder, args: readonly unknown[], template: string, site: KeySite): string {
  let value: unknown = args[placeholder.index];
  let walked = `{${placeholder.index}`;
  for (const segment of placeholder.path) {
    if (value === undefined || value === null) break;
    value = (value as Record<string, unknown>)[segment];
    walked += `.${segment}`;
  }
  const text = keyText(value);
  if (text !== undefined) return text;
  throw new LockKeyArgumentError(placeholder.source, `${walked}}`, template, site.name, value);
}

/**
 * The string form of a key part, or undefined when it has none worth locking on: a lock on
 * "undefined" or "[object Object]" would serialise unrelated calls, or worse, let them collide.
 */
function keyText(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
    case 'bigint':
    case 'boolean':
      return String(value);
    case 'number':
      return Number.isNaN(value) ? undefined : String(value);
    case 'object': {
      // Arrays stringify element by element, so [{}] becomes "[object Object]": use an array key instead.
      if (value === null || Array.isArray(value)) return undefined;
      const toString = (value as { toString?: unknown }).toString;
      if (typeof toString !== 'function' || toString === Object.prototype.toString) return undefined;
      const text = String(value);
      return /^\[object [^\]]*\]$/.test(text) ? undefined : text;
    }
    default:
      return undefined;
  }
}
