import { ConfigurableModuleBuilder, type Type } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { REDLOCK_MODULE_OPTIONS } from './redlock.constants.js';
import { RedlockInterceptor } from './redlock.interceptor.js';
import type { RedlockModuleExtras, RedlockModuleOptions } from './redlock.interfaces.js';

export const {
  ConfigurableModuleClass: ConfigurableRedlockModule,
  OPTIONS_TYPE: REDLOCK_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: REDLOCK_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<RedlockModuleOptions>({ optionsInjectionToken: REDLOCK_MODULE_OPTIONS })
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createRedlockOptions')
  .setExtras<RedlockModuleExtras>({ isGlobal: false, interceptor: undefined }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
    providers: [
      ...(definition.providers ?? []),
      // The interceptor class is chosen per registration, so it is provided here rather than in @Module.
      { provide: APP_INTERCEPTOR, useClass: (extras.interceptor ?? RedlockInterceptor) as Type<RedlockInterceptor> },
    ],
  }))
  .build();
