import { Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { Redlock } from './core/redlock.js';
import { LockPlanner, type LockPlan } from './lock-plan.js';
import { observeLocked, runLocked } from './locked-call.js';
import { RedisConnections } from './redis-connections.js';
import { RedlockConfigError } from './redlock-config.error.js';
import { RouteArgs } from './route-args.js';

/** Nest's wrapper of a provider or controller, as its public DiscoveryService hands it out. */
type InstanceWrapper = ReturnType<DiscoveryService['getProviders']>[number];

/** Set by @MessagePattern / @EventPattern (@nestjs/microservices, not a dependency). */
const MESSAGE_PATTERN_METADATA = 'microservices:pattern';

/** Wrappers this library installed, in any application of this process: never wrap one twice. */
const installed = new WeakSet<Function>();

/**
 * Applies `@WithLock` to methods of providers that are not controllers (services, scheduled
 * jobs, queue consumers): at `onModuleInit` it replaces each decorated method, on that instance
 * only, by a wrapper that runs it under the lock. The wrapper keeps the method's name, `this`,
 * and every metadata key of the original, so whatever reads metadata from the instance later
 * (schedulers, event listeners) still finds it. Nothing else is added to the instance.
 *
 * Controllers are left to `RedlockInterceptor`; their keys are still compiled here, so every
 * key mistake fails at bootstrap.
 */
@Injectable()
export class RedlockExplorer implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly planner: LockPlanner,
    private readonly redlock: Redlock,
    private readonly connections: RedisConnections,
  ) {}

  async onModuleInit(): Promise<void> {
    try {
      this.checkSingleModule();
      const controllers = this.discovery.getControllers();
      for (const wrapper of controllers) this.checkController(wrapper);
      // A controller class also listed as a provider is dispatched (and locked) by the interceptor.
      const controllerClasses = new Set<unknown>(controllers.map((wrapper) => wrapper.metatype));
      for (const wrapper of this.discovery.getProviders()) this.wrapProvider(wrapper, controllerClasses);
    } catch (error) {
      // Bootstrap stops here, and nobody will call the shutdown hooks that would close these.
      this.redlock.close();
      await this.connections.close();
      throw error;
    }
  }

  /** A second module would lock every decorated method twice, on two engines, against itself. */
  private checkSingleModule(): void {
    const explorers = this.discovery.getProviders().filter((wrapper) => wrapper.metatype === RedlockExplorer);
    if (explorers.length > 1) {
      throw new RedlockConfigError(
        'RedlockModule: registered more than once in this application; import RedlockModule.forRoot() once ' +
          '(with isGlobal: true to inject RedlockService anywhere)',
      );
    }
  }

  private checkController(wrapper: InstanceWrapper): void {
    const owner = wrapper.metatype;
    if (typeof owner !== 'function' || !owner.prototype) return;
    const prototype = owner.prototype as Record<string, unknown>;
    for (const name of this.scanner.getAllMethodNames(prototype)) {
      const method = prototype[name];
      if (typeof method !== 'function') continue;
      const plan = this.planner.planFor(owner, name, method);
      if (!plan) continue;
      if (!RouteArgs.isRoute(method)) {
        // The interceptor only sees what Nest dispatches; a helper called as this.helper()
        // would silently run unlocked.
        if (Reflect.getMetadata(MESSAGE_PATTERN_METADATA, method) !== undefined) continue;
        throw new RedlockConfigError(
          `@WithLock on ${plan.site}: not a route or message handler, so nothing would apply the lock; ` +
            'move the method to a provider (or lock inside it with RedlockService.using())',
        );
      }
      const routeArgs = new RouteArgs(owner, name);
      const missing = plan.key.argIndexes?.find((index) => !routeArgs.has(index));
      if (missing !== undefined) {
        throw new RedlockConfigError(
          `@WithLock on ${plan.site}: the lock key reads argument ${missing}, which has no parameter decorator ` +
            '(@Param, @Query, @Body, ...), so the route never receives it',
        );
      }
    }
  }

  private wrapProvider(wrapper: InstanceWrapper, controllerClasses: ReadonlySet<unknown>): void {
    // Request-scoped and transient providers have a prototype-only placeholder here.
    const instance = wrapper.instance as Record<string, unknown> | undefined;
    if (!instance || typeof instance !== 'object') return;
    const prototype = Object.getPrototypeOf(instance) as object | null;
    if (!prototype || controllerClasses.has(instance.constructor)) return;
    for (const name of this.scanner.getAllMethodNames(prototype)) {
      const method = instance[name];
      if (typeof method !== 'function') continue;
      const plan = this.planner.planFor(instance.constructor, name, method);
      if (!plan) continue;
      if (installed.has(method)) {
        throw new RedlockConfigError(
          `@WithLock on ${plan.site}: this instance is already wrapped by another application's RedlockModule; ` +
            'a provider instance shared between applications cannot be locked by both',
        );
      }
      if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) {
        // Their instances are created after bootstrap, one per request or consumer, out of reach:
        // silently running them unlocked would be worse than refusing to start.
        throw new RedlockConfigError(
          `@WithLock on ${plan.site}: the provider is request-scoped or transient (or depends on one), so its ` +
            'instances are created after bootstrap and cannot be wrapped; use RedlockService.using() inside the method',
        );
      }
      Object.defineProperty(instance, name, {
        value: this.lockedMethod(method, plan),
        writable: true,
        configurable: true,
        enumerable: false,
      });
    }
  }

  private lockedMethod(method: Function, plan: LockPlan): Function {
    const redlock = this.redlock;
    const locked = plan.returnsObservable
      ? function (this: unknown, ...args: unknown[]) {
          return observeLocked(redlock, plan, args, () => method.apply(this, args));
        }
      : function (this: unknown, ...args: unknown[]) {
          return runLocked(redlock, plan, args, () => method.apply(this, args));
        };
    Object.defineProperty(locked, 'name', { value: method.name, configurable: true });
    Object.defineProperty(locked, 'length', { value: method.length, configurable: true });
    for (const key of Reflect.getMetadataKeys(method)) {
      Reflect.defineMetadata(key, Reflect.getMetadata(key, method), locked);
    }
    installed.add(locked);
    return locked;
  }
}
