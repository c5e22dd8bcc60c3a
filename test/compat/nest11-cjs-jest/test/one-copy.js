// A CommonJS app that also loads the package through import() (an ESM dependency, a dynamic
// import in user code) must get the same classes: Nest matches providers by class identity
// and the app matches errors with instanceof.
const assert = require('node:assert/strict');

async function main() {
  const required = require('nestjs-redlock');
  const imported = await import('nestjs-redlock');
  for (const name of ['RedlockService', 'RedlockModule', 'WithLock', 'Redlock', 'LockHeldError']) {
    assert.ok(required[name], `require('nestjs-redlock').${name} is missing`);
    assert.equal(imported[name], required[name], `${name} differs between import and require`);
  }
  const coreRequired = require('nestjs-redlock/core');
  const coreImported = await import('nestjs-redlock/core');
  assert.equal(coreImported.Redlock, required.Redlock, "import('nestjs-redlock/core').Redlock is another copy");
  assert.equal(coreRequired.LockHeldError, required.LockHeldError, "require('nestjs-redlock/core').LockHeldError is another copy");
  console.log('one copy: import and require of nestjs-redlock and nestjs-redlock/core give the same classes');
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
