import { configDefaults, defineConfig } from 'vitest/config';

// Vite 8 compiles TypeScript with oxc, which reads experimentalDecorators and
// emitDecoratorMetadata from tsconfig.json: Nest's dependency injection works in tests as is.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // node-redlock's own ava test files: ava runs them (test/node-redlock/node-redlock-suite.test.ts).
    exclude: [...configDefaults.exclude, 'test/node-redlock/vendor/**'],
    // Every test file starts its own redis-server fleet; two cores do not gain from
    // more than a couple of files at once, and fault tests are sensitive to starvation.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
