import {
  Inject,
  Injectable,
  Optional,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { HttpAdapterHost, Reflector } from '@nestjs/core';
import { throwError, type Observable } from 'rxjs';
import { RedlockError } from './core/base/errors.js';
import { Redlock } from './core/redlock.js';
import type { RedlockEngine } from './core/redlock-engine.js';
import { HandlerArgs, type HandlerTransport } from './handler-args.js';
import { lockHttpException, setRetryAfter } from './errors/lock-http-exception.js';
import { LockKeyArgumentError } from './errors/lock-key-argument.error.js';
import { LockKeyBadRequestException } from './errors/lock-key-bad-request.exception.js';
import { LockPlanner, type LockPlan } from './lock-plan.js';
import { observeLocked } from './locked-call.js';
import type { RedlockSettings } from './module-settings.js';
import { REDLOCK_SETTINGS, WITH_LOCK } from './redlock.constants.js';
import { transportLockException } from './errors/transport-lock-exception.js';

const TRANSPORTS: ReadonlySet<string> = new Set<HandlerTransport>(['http', 'rpc', 'ws', 'graphql']);

/**
 * Applies `@WithLock` to the handlers Nest dispatches: HTTP routes, microservice message and
 * event handlers, websocket gateway handlers, GraphQL resolvers (registered by `RedlockModule`
 * as a global interceptor; handlers without the decorator pass straight through). The lock is
 * taken before the handler runs and held until its result completes, errors, or is
 * unsubscribed. `{N}` in a key is the handler's Nth parameter on every transport.
 *
 * A lock that cannot be had becomes the transport's own error: over HTTP 409 (held elsewhere,
 * with a `Retry-After` estimated from how long the handler has held its lock recently, between
 * 1 s and the holder's remaining ttl), 503 (too few masters), or 400 when an argument the client sent cannot
 * form the key; elsewhere an `RpcException`, a `WsException` or a `GraphQLError` carrying the same
 * facts (`lockErrorPayload`). Under `onLocked: 'skip'` a handler whose lock is held elsewhere
 * does not run and the call yields undefined: over HTTP the route's status with an empty body,
 * an empty reply to a message, no reply on a websocket, null in GraphQL. To change the mapping,
 * set the `errorMapper` option, or subclass and override `toHttpException` or
 * `toTransportException` and register the subclass with
 * `RedlockModule.forRoot({ ..., interceptor: MyInterceptor })`.
 *
 * Its dependencies are injected into properties, not the constructor, so a subclass can have a
 * constructor of its own for what it needs (`constructor(private readonly metrics: Metrics) { super(); }`)
 * and the module's internals stay out of its signature.
 */
@Injectable()
export class RedlockInterceptor implements NestInterceptor {
  /** The engine the module's locks are taken with (under `RedlockTestingModule`, the in-memory one). */
  @Inject(Redlock) protected readonly redlock!: RedlockEngine;
  /** Present when the app serves HTTP: sets `Retry-After` on Express and Fastify alike. */
  @Optional() @Inject(HttpAdapterHost) protected readonly adapterHost?: HttpAdapterHost;
  @Inject(LockPlanner) private readonly planner!: LockPlanner;
  @Inject(Reflector) private readonly reflector!: Reflector;
  @Inject(REDLOCK_SETTINGS) private readonly settings!: RedlockSettings;
  readonly #handlerArgs = new WeakMap<Function, HandlerArgs>();

  /** Runs a `@WithLock` handler under its lock; any other handler as it is. */
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const handler = context.getHandler();
    if (!this.reflector.get(WITH_LOCK, handler)) return next.handle();
    let plan: LockPlan;
    let args: readonly unknown[];
    try {
      const owner = context.getClass();
      plan = this.planner.planFor(owner, handler.name, handler)!;
      // Interceptors run before Nest builds the handler's arguments: read them as it will.
      args = this.handlerArgs(owner, handler, context.getType())?.read(context, plan.key.argIndexes) ?? context.getArgs();
    } catch (error) {
      return throwError(() => error);
    }
    return observeLocked(this.redlock, plan, args, () => next.handle(), {
      mapAcquireError: (error) => this.mapError(error, context),
      emitOnSkip: true,
    });
  }

  /**
   * The default HTTP mapping of a lock that could not be taken: 409 with `Retry-After` when
   * another owner holds it, 503 when too few masters answered, 400 when a key argument from the
   * request cannot form the key; anything else unchanged.
   */
  protected toHttpException(error: RedlockError, context: ExecutionContext): unknown {
    const exception = error instanceof LockKeyArgumentError ? LockKeyBadRequestException.fromError(error) : lockHttpException(error);
    if (!exception) return error;
    setRetryAfter(exception, context.switchToHttp().getResponse(), this.adapterHost);
    return exception;
  }

  /**
   * The default mapping on the other transports (`context.getType()` 'rpc', 'ws' or 'graphql'):
   * `RpcException`, `WsException` or `GraphQLError`, the transport's package loaded on first use;
   * anything else unchanged. May return a promise of the exception.
   */
  protected toTransportException(error: RedlockError, context: ExecutionContext): unknown {
    return transportLockException(error, context.getType());
  }

  private mapError(error: unknown, context: ExecutionContext): unknown {
    if (!(error instanceof RedlockError)) return error;
    if (this.settings.errorMapper) return this.settings.errorMapper(error, context);
    return context.getType() === 'http' ? this.toHttpException(error, context) : this.toTransportException(error, context);
  }

  /** How the handler gets its arguments on this transport; undefined on one Nest does not ship. */
  private handlerArgs(owner: Function, handler: Function, transport: string): HandlerArgs | undefined {
    if (!TRANSPORTS.has(transport)) return undefined;
    let handlerArgs = this.#handlerArgs.get(handler);
    if (handlerArgs?.transport !== transport) {
      handlerArgs = new HandlerArgs(owner, handler, transport as HandlerTransport);
      this.#handlerArgs.set(handler, handlerArgs);
    }
    return handlerArgs;
  }
}
