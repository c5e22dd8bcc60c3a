// The ESM entry of `nestjs-redlock/testing`: the CommonJS build, re-exported (see ../index.mts).
export * from './index.js';
