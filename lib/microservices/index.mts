// The ESM entry of `nestjs-redlock/microservices`: the CommonJS build, re-exported (see ../index.mts).
export * from './index.js';
