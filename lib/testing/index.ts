export { RedlockTestingModule } from './redlock-testing.module.js';
export { REDLOCK_TESTING_ASYNC_OPTIONS_TYPE, REDLOCK_TESTING_OPTIONS_TYPE } from './redlock-testing.module-definition.js';
export type { RedlockTestingModuleOptions } from './redlock-testing.interfaces.js';
export { IN_MEMORY_MASTER, InMemoryRedlock, type HoldElsewhereOptions } from './in-memory-redlock.js';
export type { RedlockEngine } from '../core/redlock-engine.js';
