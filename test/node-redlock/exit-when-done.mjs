// Loaded by ava (ava.config.mjs `require`) in each test process before the test file.
// node-redlock's test files open ioredis clients at load time and never close them, so their
// process would not exit by itself: ava 6 then waits out its timeout and fails the run with
// "Failed to exit" although every test passed. ava 6's remedy: exit once ava has completed the
// run (it calls this only when no uncaught exception or unhandled rejection occurred).
import { registerCompletionHandler } from 'ava';

registerCompletionHandler(() => {
  process.exit();
});
