import { type DynamicModule, Logger, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { AvailabilityAnnouncement } from './availability-announcement.js';
import { Redlock } from './core/redlock.js';
import { LockPlanner } from './lock-plan.js';
import { resolveSettings, type RedlockSettings } from './module-settings.js';
import { RedisConnections } from './redis-connections.js';
import { REDLOCK_MODULE_OPTIONS, REDLOCK_SETTINGS } from './redlock.constants.js';
import { RedlockExplorer } from './redlock.explorer.js';
import type { RedlockModuleOptions } from './redlock.interfaces.js';
import { ConfigurableRedlockModule, type RedlockModuleAsyncOptions, type RedlockModuleExtras } from './redlock.module-definition.js';
import { RedlockConfigError } from './errors/redlock-config.error.js';
import { LeadershipService } from './leadership.service.js';
import { RedlockService } from './redlock.service.js';

async function openConnections(settings: RedlockSettings): Promise<RedisConnections> {
  return RedisConnections.open(settings.nodes, new Logger('Redlock'), settings.client);
}

async function createEngine(settings: RedlockSettings, connections: RedisConnections, announcement: AvailabilityAnnouncement): Promise<Redlock> {
  let engine: Redlock | undefined;
  try {
    engine = new Redlock(connections.clients, { ...settings.engine, logger: announcement.engineLogger });
    // The restart quarantine's window must cover the app's locks from the first one on.
    engine.expectTtl(settings.defaultTtlMs);
    // Names are compared when the options are read; one server under two names only shows here.
    await engine.verifyMasters();
    // A Redis user whose ACL lacks a command the engine needs fails here, naming it, not at a lock.
    await engine.verifyPermissions();
    announcement.watch(engine);
    return engine;
  } catch (error) {
    engine?.close();
    await connections.close();
    // The engine numbers its clients as the module's options number the nodes.
    throw error instanceof Error ? new RedlockConfigError(`RedlockModule: ${error.message.replace(/\bclients\[/g, 'options.nodes[')}`) : error;
  }
}

/**
 * Distributed locks over independent Redis masters (Redlock) for Nest: `RedlockService` for
 * code, `@WithLock()` for controller handlers and provider methods.
 *
 * ```ts
 * RedlockModule.forRoot({ nodes: ['redis://a:6379', 'redis://b:6379', 'redis://c:6379'], isGlobal: true })
 * RedlockModule.forRootAsync({ isGlobal: true, inject: [ConfigService], useFactory: (c) => ({ nodes: c.get('REDLOCK_NODES') }) })
 * ```
 * Register it once per application.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    // Validation first: a bad configuration fails before any connection is opened.
    { provide: REDLOCK_SETTINGS, useFactory: (options: RedlockModuleOptions) => resolveSettings(options), inject: [REDLOCK_MODULE_OPTIONS] },
    { provide: RedisConnections, useFactory: openConnections, inject: [REDLOCK_SETTINGS] },
    {
      provide: AvailabilityAnnouncement,
      useFactory: (settings: RedlockSettings) => new AvailabilityAnnouncement(settings.engine.logger!),
      inject: [REDLOCK_SETTINGS],
    },
    { provide: Redlock, useFactory: createEngine, inject: [REDLOCK_SETTINGS, RedisConnections, AvailabilityAnnouncement] },
    LockPlanner,
    RedlockService,
    RedlockExplorer,
    LeadershipService,
  ],
  exports: [RedlockService, LeadershipService, Redlock],
})
export class RedlockModule {
  /** Registers the module with options known when the app module is declared. */
  static forRoot(options: RedlockModuleOptions & RedlockModuleExtras): DynamicModule {
    return { ...ConfigurableRedlockModule.forRoot(options), module: RedlockModule };
  }

  /** Registers the module with options made by a factory, a class or an existing provider, with injection. */
  static forRootAsync(options: RedlockModuleAsyncOptions): DynamicModule {
    return { ...ConfigurableRedlockModule.forRootAsync(options), module: RedlockModule };
  }
}
