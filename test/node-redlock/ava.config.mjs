// ava's configuration for node-redlock's own tests (test/node-redlock/vendor), run by
// test/node-redlock/harness.ts: `ava --config test/node-redlock/ava.config.mjs --tap`.
// TypeScript is compiled the way the repo's other child processes get it: the oxc loader in
// test/support/ts-loader (type-stripping only; `./index.js` resolves to vendor/index.ts).
import { fileURLToPath } from 'node:url';

export default {
  files: ['test/node-redlock/vendor/*.test.ts'],
  extensions: { ts: 'module' },
  nodeArguments: ['--import', fileURLToPath(new URL('../support/ts-loader/register.mjs', import.meta.url))],
  // The vendored files never close their ioredis clients: exit once ava is done (see the file).
  require: ['./test/node-redlock/exit-when-done.mjs'],
  // A child process per file (the loader's hooks are registered per process), one file after the
  // other (less load: the tests check TTLs to within ~100 ms); the tests inside a file run
  // concurrently against the file's shared servers, as in node-redlock's own CI.
  workerThreads: false,
  concurrency: 1,
  // ava's default (10 s without activity) is tight beside other work on a 2-core machine.
  timeout: '60s',
  // No watch mode state, no cache files in the work tree.
  cache: false,
};
