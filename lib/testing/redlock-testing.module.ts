import { type DynamicModule, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { Redlock } from '../core/redlock.js';
import { LockPlanner } from '../lock-plan.js';
import { resolveSettings, type RedlockSettings } from '../module-settings.js';
import { RedisConnections } from '../redis-connections.js';
import { REDLOCK_MODULE_OPTIONS, REDLOCK_SETTINGS } from '../redlock.constants.js';
import { RedlockExplorer } from '../redlock.explorer.js';
import type { RedlockModuleOptions } from '../redlock.interfaces.js';
import { RedlockConfigError } from '../errors/redlock-config.error.js';
import { LeadershipService } from '../leadership.service.js';
import { RedlockService } from '../redlock.service.js';
import { IN_MEMORY_MASTER, InMemoryRedlock } from './in-memory-redlock.js';
import type { RedlockTestingModuleAsyncOptions, RedlockTestingModuleOptions } from './redlock-testing.interfaces.js';
import { ConfigurableRedlockTestingModule } from './redlock-testing.module-definition.js';
import type { RedlockModuleExtras } from '../redlock.module-definition.js';

/** RedlockModule's checks, so options that fail there fail here too; `nodes` aside, as nothing connects. */
function resolveTestingSettings(options: RedlockTestingModuleOptions | undefined): RedlockSettings {
  if (options !== undefined && (options === null || typeof options !== 'object')) {
    throw new RedlockConfigError('RedlockTestingModule: options must be an object of RedlockModule options');
  }
  try {
    const settings = resolveSettings({ ...options, nodes: [IN_MEMORY_MASTER] } as RedlockModuleOptions);
    return { ...settings, nodes: [] };
  } catch (error) {
    if (!(error instanceof RedlockConfigError)) throw error;
    throw new RedlockConfigError(error.message.replace(/^RedlockModule:/, 'RedlockTestingModule:'));
  }
}

/**
 * `RedlockModule` for unit tests: the same `RedlockService`, `@WithLock`, interceptor, errors and
 * HTTP mapping, over `InMemoryRedlock` instead of Redis masters. Register it where the app
 * registers `RedlockModule` (same options, `nodes` not needed), and get the engine with
 * `moduleRef.get(InMemoryRedlock)` to make a resource look held elsewhere, the masters
 * unreachable, or a held lock lost.
 *
 * ```ts
 * Test.createTestingModule({ imports: [RedlockTestingModule.forRoot()], controllers: [OrdersController] })
 * Test.createTestingModule({ imports: [AppModule] }).overrideModule(RedlockModule).useModule(RedlockTestingModule.forRoot())
 * ```
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    { provide: REDLOCK_SETTINGS, useFactory: resolveTestingSettings, inject: [REDLOCK_MODULE_OPTIONS] },
    // No masters, so no connections: an empty set, closed at shutdown like the real one.
    { provide: RedisConnections, useFactory: () => RedisConnections.open([]) },
    { provide: InMemoryRedlock, useFactory: (settings: RedlockSettings) => new InMemoryRedlock(settings.engine), inject: [REDLOCK_SETTINGS] },
    // Whatever injects the engine (the service, the interceptor, a health indicator, the app) gets this one.
    { provide: Redlock, useExisting: InMemoryRedlock },
    LockPlanner,
    RedlockService,
    RedlockExplorer,
    LeadershipService,
  ],
  exports: [RedlockService, LeadershipService, Redlock, InMemoryRedlock],
})
export class RedlockTestingModule {
  /** Every option is optional here: `RedlockTestingModule.forRoot()` is a complete registration. */
  static forRoot(options: RedlockTestingModuleOptions & RedlockModuleExtras = {}): DynamicModule {
    return { ...ConfigurableRedlockTestingModule.forRoot(options), module: RedlockTestingModule };
  }

  /** As `RedlockModule.forRootAsync`, with the options made by a factory, a class or an existing provider. */
  static forRootAsync(options: RedlockTestingModuleAsyncOptions): DynamicModule {
    return { ...ConfigurableRedlockTestingModule.forRootAsync(options), module: RedlockTestingModule };
  }
}
