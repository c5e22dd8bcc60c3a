// The ESM entry of `nestjs-redlock/testing`: the CommonJS build, re-exported (see ../index.mts).
export {
  IN_MEMORY_MASTER,
  InMemoryRedlock,
  RedlockTestingModule,
  type HoldElsewhereOptions,
  type RedlockEngine,
  type RedlockTestingModuleAsyncOptions,
  type RedlockTestingModuleOptions,
} from './index.js';
