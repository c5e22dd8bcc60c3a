// import and require of nestjs-redlock/core must give one copy of the engine: errors are
// matched with instanceof, and a lock from one copy must be usable with the other's types.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as imported from 'nestjs-redlock/core';

const required = createRequire(import.meta.url)('nestjs-redlock/core');
for (const name of ['Redlock', 'Lock', 'LockHeldError', 'QuorumUnreachableError', 'RedlockError']) {
  assert.ok(imported[name], `nestjs-redlock/core exports no ${name}`);
  assert.equal(required[name], imported[name], `${name} differs between import and require`);
}
console.log('one copy: import and require of nestjs-redlock/core give the same classes');
