import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '../../lib/core/base/errors.js';
import { compileLockKey, type KeySite } from '../../lib/lock-key.js';
import { RedlockConfigError } from '../../lib/errors/redlock-config.error.js';

// Key templates are compiled once at bootstrap and resolved on every call; these tests pin
// both halves without Nest or Redis.

const site: KeySite = { name: 'Orders.pay', paramCount: 3 };
const resolve = (key: Parameters<typeof compileLockKey>[0], ...args: unknown[]) => compileLockKey(key, site).resolve(args);

describe('compiling a key', () => {
  it('fills positional arguments and property paths, keeping literal text', () => {
    expect(resolve('order:{0}', 7)).toEqual(['order:7']);
    expect(resolve('t:{1.user.name}/{0}', 'a', { user: { name: 'ann' } })).toEqual(['t:ann/a']);
    expect(resolve('list:{0.items.1}', { items: ['x', 'y'] })).toEqual(['list:y']);
    expect(resolve('static-key')).toEqual(['static-key']);
  });

  it('reads {{ and }} as literal braces', () => {
    expect(resolve('{{tag}}:{0}', 'x')).toEqual(['{tag}:x']);
  });

  it('turns an array of templates into one lock over several resources', () => {
    const key = compileLockKey(['account:{0}', 'account:{2.id}'], site);
    expect(key.resolve(['a', undefined, { id: 'b' }])).toEqual(['account:a', 'account:b']);
    expect(key.argIndexes).toEqual([0, 2]);
  });

  it('calls a key function with the arguments and checks what it returns', () => {
    expect(resolve((a: string, b: string) => [`x:${a}`, `y:${b}`], '1', '2')).toEqual(['x:1', 'y:2']);
    expect(compileLockKey(() => 'k', site).argIndexes).toBeUndefined();
    expect(() => resolve(() => '')).toThrow(InvalidArgumentError);
    expect(() => resolve(() => [])).toThrow(/lock key function of Orders\.pay/);
    expect(() => resolve(() => undefined as unknown as string)).toThrow(InvalidArgumentError);
  });

  it.each([
    ['order:{0', /unclosed "\{" at position 6/],
    ['order:0}', /unmatched "\}" at position 7/],
    ['order:{}', /invalid placeholder \{\}/],
    ['order:{id}', /invalid placeholder \{id\}/],
    ['order:{0..id}', /invalid placeholder/],
    ['order:{0.}', /invalid placeholder/],
    ['order:{3}', /reads argument 3 in \{3\}, but Orders\.pay declares 3 parameters/],
    ['', /is empty/],
  ])('rejects template %j at compile time, naming class, method and template', (template, why) => {
    let error: unknown;
    try {
      compileLockKey(template, site);
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(RedlockConfigError);
    expect((error as Error).message).toContain('@WithLock on Orders.pay');
    expect((error as Error).message).toContain(JSON.stringify(template));
    expect((error as Error).message).toMatch(why);
  });

  it('rejects keys that are neither template, array nor function', () => {
    expect(() => compileLockKey([] as string[], site)).toThrow(RedlockConfigError);
    expect(() => compileLockKey(42 as unknown as string, site)).toThrow(/must be a template string/);
    expect(() => compileLockKey(['a', 1] as unknown as string[], site)).toThrow(/every key template must be a string/);
  });
});

describe('resolving a key at call time', () => {
  it('accepts strings, numbers, bigints, booleans and objects with their own toString', () => {
    class Id {
      constructor(private readonly v: string) {}
      toString() {
        return `id-${this.v}`;
      }
    }
    expect(resolve('k:{0}:{1}:{2}', 1.5, 10n, false)).toEqual(['k:1.5:10:false']);
    expect(resolve('k:{0}', new Id('9'))).toEqual(['k:id-9']);
    expect(resolve('k:{0}', new Date(0))).toEqual([`k:${String(new Date(0))}`]);
  });

  it.each([
    ['undefined', undefined],
    ['null', null],
    ['a plain object', { id: 1 }],
    ['a class instance without toString', new (class Thing {})()],
    ['a null-prototype object', Object.create(null)],
    ['an array', ['a']],
    ['NaN', Number.NaN],
    ['a symbol', Symbol('s')],
    ['a function', () => 'x'],
  ])('refuses %s instead of locking on its useless string form', (_label, value) => {
    let error: unknown;
    try {
      resolve('user:{0}', value);
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(InvalidArgumentError);
    const message = (error as Error).message;
    expect(message).toContain('Orders.pay');
    expect(message).toContain('"user:{0}"');
    expect(message).toContain('{0}');
  });

  it('names the path and where it broke off', () => {
    expect(() => resolve('u:{1.user.name}', 'a', {})).toThrow(
      /\{1\.user\.name\} \(at \{1\.user\}\) in lock key template "u:\{1\.user\.name\}" of Orders\.pay: undefined/,
    );
    expect(() => resolve('u:{1.user.name}', 'a', { user: {} })).toThrow(/\{1\.user\.name\} in lock key template/);
    expect(() => resolve('u:{0.id}', null)).toThrow(/\{0\.id\} \(at \{0\}\).*: null/);
  });
});
