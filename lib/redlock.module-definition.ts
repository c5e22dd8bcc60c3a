import { ConfigurableModuleBuilder, type ConfigurableModuleAsyncOptions, type DynamicModule, type Type } from '@nestjs/common';
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

/**
 * What `RedlockModule.forRootAsync` takes: where the options come from (`useFactory` with
 * `inject`, `useClass`, or `useExisting` of a `RedlockOptionsFactory`, plus `imports`), and the
 * registration's own `isGlobal` and `interceptor`.
 */
export interface RedlockModuleAsyncOptions
  extends ConfigurableModuleAsyncOptions<RedlockModuleOptions, 'createRedlockOptions'>,
    RedlockModuleExtras {}

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

/**
 * Builds RedlockModule's `forRoot` and `forRootAsync`. RedlockModule calls it rather than
 * extending it, so the published class names only public types.
 */
export const { ConfigurableModuleClass: ConfigurableRedlockModule } = new ConfigurableModuleBuilder<RedlockModuleOptions>({ optionsInjectionToken: REDLOCK_MODULE_OPTIONS })
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createRedlockOptions')
  .setExtras<RedlockModuleExtras>({ isGlobal: false, interceptor: undefined }, applyRedlockExtras)
  .build();
