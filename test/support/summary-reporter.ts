import type { Reporter, SerializedError, TestModule } from 'vitest/node';

/**
 * Ends the run with the one line CI reads: `N passed, N failed[, N skipped]`.
 * A test file that failed to load, or an unhandled error, counts as a failure,
 * so a broken suite can never print "0 failed".
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<SerializedError>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const testModule of testModules) {
      let testsInModule = 0;
      for (const test of testModule.children.allTests()) {
        testsInModule++;
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
      const moduleErrors = testModule.errors().length;
      if (moduleErrors > 0 && testsInModule === 0) failed += moduleErrors;
    }
    const tail = skipped > 0 ? `, ${skipped} skipped` : '';
    process.stdout.write(`\n${passed} passed, ${failed} failed${tail}\n`);
  }
}
