import { ConfigurableModuleBuilder, type DynamicModule, type Type } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { REDLOCK_MODULE_OPTIONS } from './redlock.constants.js';
import { RedlockInterceptor } from './redlock.interceptor.js';
import type { RedlockModuleExtras, RedlockModuleOptions } from './redlock.interfaces.js';

/** What `isGlobal` and `interceptor` do to a registration (of RedlockModule, or RedlockTestingModule). */
export function applyRedlockExtras(definition: DynamicModule, extras: RedlockModuleExtras): DynamicModule {
  return {
    ...definition,
    global: extras.isGlobal,
    providers: [
      ...(definition.providers ?? []),
      // The interceptor class is chosen per registration, so it is provided here rather than in @Module.
      { provide: APP_INTERCEPTOR, useClass: (extras.interceptor ?? RedlockInterceptor) as Type<RedlockInterceptor> },
    ],
  };
}

export const {
  ConfigurableModuleClass: ConfigurableRedlockModule,
  OPTIONS_TYPE: REDLOCK_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: REDLOCK_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<RedlockModuleOptions>({ optionsInjectionToken: REDLOCK_MODULE_OPTIONS })
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createRedlockOptions')
  .setExtras<RedlockModuleExtras>({ isGlobal: false, interceptor: undefined }, applyRedlockExtras)
  .build();
