// The ESM entry of `nestjs-redlock/websockets`: the CommonJS build, re-exported (see ../index.mts).
export * from './index.js';
