// The ESM entry of `nestjs-redlock/opentelemetry`: the CommonJS build, re-exported (see ../index.mts).
export * from './index.js';
