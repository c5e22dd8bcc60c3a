// The ESM entry of `nestjs-redlock/core`: the CommonJS build, re-exported, so `import` and
// `require` share one Redlock class (see ../index.mts).
export * from './index.js';
