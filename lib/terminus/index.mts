// The ESM entry of `nestjs-redlock/terminus`: the CommonJS build, re-exported (see ../index.mts).
export {
  LeadershipHealthIndicator,
  RedlockHealthIndicator,
  type LeadershipHealthOptions,
  type MasterHealth,
  type MastersHealth,
  type RedlockHealthOptions,
} from './index.js';
