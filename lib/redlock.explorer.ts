import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, ModuleRef } from '@nestjs/core';
import { Redlock } from './core/redlock.js';
import type { RedlockEngine } from './core/redlock-engine.js';
import { HandlerArgs, type HandlerTransport } from './handler-args.js';
import { LockPlanner, type LockPlan } from './lock-plan.js';
import { observeLocked, runLocked } from './locked-call.js';
import { copyIdentity, defineLocked, installStandIn, isLockedWrapper, originalOf } from './locked-methods.js';
import { RedisConnections } from './redis-connections.js';
import { RedlockConfigError } from './errors/redlock-config.error.js';
import { WITH_LOCK } from './redlock.constants.js';

/** Nest's wrapper of a provider or controller, as its public DiscoveryService hands it out. */
type InstanceWrapper = ReturnType<DiscoveryService['getProviders']>[number];

/** Set by @ResolveField; such a resolver runs interceptors only when the GraphQL module says so. */
const FIELD_RESOLVER_METADATA = 'graphql:resolve_property';
/** GraphQLModule's options token (@nestjs/graphql is an optional peer: not imported). */
const GRAPHQL_MODULE_OPTIONS = 'GqlModuleOptions';

/** The parameter decorators that give a handler its arguments, by transport, for messages. */
const PARAM_DECORATORS: Readonly<Record<HandlerTransport, string>> = {
  http: '@Param, @Query, @Body, ...',
  rpc: '@Payload, @Ctx, ...',
  ws: '@MessageBody, @ConnectedSocket, ...',
  graphql: '@Args, @Parent, @Context, @Info, ...',
};

/**
 * Applies `@WithLock` to methods of providers that are not handlers (services, scheduled jobs,
 * queue consumers): at `onModuleInit` it gives each instance, for each decorated method, a
 * wrapper that runs the method under the lock (see locked-methods.ts for how callers that took
 * the method earlier, like @nestjs/schedule, reach it too). The wrapper keeps the method's name,
 * `this`, and every metadata key of the original. Nothing else is added to the instance.
 *
 * Handlers that Nest dispatches (controller routes and message handlers, gateway handlers,
 * GraphQL resolvers) are left to `RedlockInterceptor`; their keys are compiled and checked here
 * against the arguments each handler receives, so every key mistake fails at bootstrap.
 */
@Injectable()
export class RedlockExplorer implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly planner: LockPlanner,
    @Inject(Redlock) private readonly redlock: RedlockEngine,
    private readonly connections: RedisConnections,
    private readonly moduleRef: ModuleRef,
  ) {
    // Here rather than in onModuleInit: other modules' onModuleInit may run before ours.
    this.installStandIns();
  }

  async onModuleInit(): Promise<void> {
    try {
      this.checkSingleModule();
      const controllers = this.discovery.getControllers();
      for (const wrapper of controllers) this.checkController(wrapper);
      // A controller class also listed as a provider is dispatched (and locked) by the interceptor.
      const controllerClasses = new Set<unknown>(controllers.map((wrapper) => wrapper.metatype));
      const ticks: Promise<void>[] = [];
      for (const wrapper of this.discovery.getProviders()) this.wrapProvider(wrapper, controllerClasses, ticks);
      // Before any job runs (@nestjs/schedule starts them once the application has bootstrapped).
      await Promise.all(ticks);
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

  /** Every decorated provider method that is not a handler gets its stand-in, before any onModuleInit. */
  private installStandIns(): void {
    const controllerClasses = new Set<unknown>(this.discovery.getControllers().map((wrapper) => wrapper.metatype));
    for (const wrapper of this.discovery.getProviders()) {
      // Known before instantiation for class providers; a factory's class shows only in its instance.
      const owner = wrapper.inject ? undefined : (wrapper.metatype ?? (wrapper.instance as object | undefined)?.constructor);
      if (typeof owner !== 'function' || !owner.prototype || controllerClasses.has(owner)) continue;
      const prototype = owner.prototype as Record<string, unknown>;
      for (const name of this.scanner.getAllMethodNames(prototype)) {
        const method = prototype[name];
        if (typeof method !== 'function' || !Reflect.hasMetadata(WITH_LOCK, method) || isDispatched(method)) continue;
        installStandIn(prototype, name);
      }
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
      const transport = HandlerArgs.transportOf(method);
      if (transport !== 'http' && transport !== 'rpc') {
        // The interceptor only sees what Nest dispatches; a helper called as this.helper()
        // would silently run unlocked.
        throw new RedlockConfigError(
          `@WithLock on ${plan.site}: not a route or message handler, so nothing would apply the lock; ` +
            'move the method to a provider (or lock inside it with RedlockService.using())',
        );
      }
      this.checkHandler(owner, method, plan, transport);
    }
  }

  /** The key of a handler may only read arguments the handler receives, and the interceptor must see its calls. */
  private checkHandler(owner: Function, method: Function, plan: LockPlan, transport: HandlerTransport): void {
    const handlerArgs = new HandlerArgs(owner, method, transport);
    const missing = plan.key.argIndexes?.find((index) => !handlerArgs.has(index));
    if (missing !== undefined) {
      throw new RedlockConfigError(
        `@WithLock on ${plan.site}: the lock key reads argument ${missing}, which has no parameter decorator ` +
          `(${PARAM_DECORATORS[transport]}), so the ${transport === 'http' ? 'route' : 'handler'} never receives it`,
      );
    }
    if (transport === 'graphql' && Reflect.getMetadata(FIELD_RESOLVER_METADATA, method) === true && !this.fieldResolversIntercepted()) {
      throw new RedlockConfigError(
        `@WithLock on ${plan.site}: a field resolver runs interceptors only with GraphQLModule's ` +
          "fieldResolverEnhancers: ['interceptors'], so nothing would apply the lock; set it, or lock inside the " +
          'method with RedlockService.using()',
      );
    }
  }

  private fieldResolversIntercepted(): boolean {
    let options: { fieldResolverEnhancers?: readonly string[] } | undefined;
    try {
      options = this.moduleRef.get(GRAPHQL_MODULE_OPTIONS, { strict: false });
    } catch {
      return false;
    }
    return options?.fieldResolverEnhancers?.includes('interceptors') ?? false;
  }

  /** `ticks` gets each `oncePerTick` job's preparation (the cron parser loaded), to be awaited. */
  private wrapProvider(wrapper: InstanceWrapper, controllerClasses: ReadonlySet<unknown>, ticks: Promise<void>[]): void {
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
      if (isDispatched(method)) {
        // A gateway's or resolver's handler: Nest calls it through the interceptor.
        this.checkHandler(instance.constructor, method, plan, HandlerArgs.transportOf(method)!);
        continue;
      }
      if (isLockedWrapper(method)) {
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
      if (plan.ticks) ticks.push(plan.ticks.ready());
      // A factory-made instance's class is known only now; its stand-in comes later than for others.
      installStandIn(prototype, name);
      defineLocked(instance, name, this.lockedMethod(originalOf(method), method, plan));
    }
  }

  /** `original` under the lock; `method` (the original or its stand-in) lends it its identity. */
  private lockedMethod(original: Function, method: Function, plan: LockPlan): Function {
    const redlock = this.redlock;
    const locked = plan.returnsObservable
      ? function (this: unknown, ...args: unknown[]) {
          return observeLocked(redlock, plan, args, () => original.apply(this, args), { skipWhenUnavailable: true });
        }
      : function (this: unknown, ...args: unknown[]) {
          return runLocked(redlock, plan, args, () => original.apply(this, args));
        };
    copyIdentity(method, locked);
    return locked;
  }
}

/** Handlers of gateways and resolvers, which are providers: Nest dispatches them, through the interceptor. */
function isDispatched(method: Function): boolean {
  const transport = HandlerArgs.transportOf(method);
  return transport === 'ws' || transport === 'graphql';
}
