export { RedlockTestingModule } from './redlock-testing.module.js';
export type { RedlockTestingModuleAsyncOptions, RedlockTestingModuleOptions } from './redlock-testing.interfaces.js';
export { IN_MEMORY_MASTER, InMemoryRedlock, type HoldElsewhereOptions } from './in-memory-redlock.js';
export type { RedlockEngine } from '../core/index.js';
