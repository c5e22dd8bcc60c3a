import { defineConfig } from 'vitest/config';

// Vite 8 compiles TypeScript with oxc, which reads experimentalDecorators and
// emitDecoratorMetadata from tsconfig.json: without the metadata Nest could not inject
// constructor parameters. Hence "vite": "^8" in package.json (Vite 7 used esbuild, which
// emits no decorator metadata).
export default defineConfig({
  test: {
    // Not *.test.ts: the repository's own vitest run must not pick these files up.
    include: ['test/**/*.e2e-spec.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
