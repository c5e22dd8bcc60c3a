// The ESM entry of `nestjs-redlock/terminus`: the CommonJS build, re-exported (see ../index.mts).
export * from './index.js';
