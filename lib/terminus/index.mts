// The ESM entry of `nestjs-redlock/terminus`: the CommonJS build, re-exported (see ../index.mts).
export {
  RedlockHealthIndicator,
  type MasterHealth,
  type MastersHealth,
  type RedlockHealthOptions,
} from './index.js';
