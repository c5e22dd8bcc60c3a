import { ConfigurableModuleBuilder } from '@nestjs/common';
import { REDLOCK_MODULE_OPTIONS } from '../redlock.constants.js';
import { applyRedlockExtras, type RedlockModuleExtras } from '../redlock.module-definition.js';
import type { RedlockTestingModuleOptions } from './redlock-testing.interfaces.js';

// The same token, method names and extras as RedlockModule's: a registration of one is a
// registration of the other with the module's name changed.
export const { ConfigurableModuleClass: ConfigurableRedlockTestingModule } = new ConfigurableModuleBuilder<RedlockTestingModuleOptions>({
  optionsInjectionToken: REDLOCK_MODULE_OPTIONS,
})
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createRedlockOptions')
  .setExtras<RedlockModuleExtras>({ isGlobal: false, interceptor: undefined }, applyRedlockExtras)
  .build();
