import type { ConfigurableModuleAsyncOptions } from '@nestjs/common';
import type { RedlockModuleOptions } from '../redlock.interfaces.js';
import type { RedlockModuleExtras } from '../redlock.module-definition.js';

/**
 * `RedlockModule`'s options, every one optional: `defaultTtlMs`, `defaultWait`, `errorMapper` and
 * the engine's wait, fencing and key options mean what they mean there. `nodes` may be given (the
 * same options object serves both modules) and is ignored: nothing connects.
 */
export type RedlockTestingModuleOptions = Omit<RedlockModuleOptions, 'nodes'> & Partial<Pick<RedlockModuleOptions, 'nodes'>>;

/**
 * What `RedlockTestingModule.forRootAsync` takes: the same as `RedlockModule.forRootAsync`, the
 * options it makes needing no `nodes`.
 */
export interface RedlockTestingModuleAsyncOptions
  extends ConfigurableModuleAsyncOptions<RedlockTestingModuleOptions, 'createRedlockOptions'>,
    RedlockModuleExtras {}
