import { ConfigurableModuleBuilder, type DynamicModule, type Type } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { REDLOCK_MODULE_OPTIONS } from './redlock.constants.js';
import { RedlockInterceptor } from './redlock.interceptor.js';
import type { RedlockModuleOptions } from './redlock.interfaces.js';

/**
 * Registration options beside the Redlock options themselves, taken by `RedlockModule.forRoot`,
 * `forRootAsync` and `RedlockTestingModule`. Declared here, with the registration, rather than
 * in redlock.interfaces.ts: the interceptor's files import those interfaces, so naming the
 * interceptor class there would close an import circle.
 */
export interface RedlockModuleExtras {
  /** Register the module globally, so `RedlockService` can be injected anywhere. Default false. */
  isGlobal?: boolean;
  /**
   * The interceptor registered for decorated controller handlers: a subclass of
   * `RedlockInterceptor` that overrides `toHttpException`, for example. Default `RedlockInterceptor`.
   */
  interceptor?: Type<RedlockInterceptor>;
}

/** What `isGlobal` and `interceptor` do to a registration (of RedlockModule, or RedlockTestingModule). */
export function applyRedlockExtras(definition: DynamicModule, extras: RedlockModuleExtras): DynamicModule {
  return {
    ...definition,
    global: extras.isGlobal,
    providers: [
      ...(definition.providers ?? []),
      // The interceptor class is chosen per registration, so it is provided here rather than in @Module.
      { provide: APP_INTERCEPTOR, useClass: extras.interceptor ?? RedlockInterceptor },
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
