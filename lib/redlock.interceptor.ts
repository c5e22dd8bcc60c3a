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
import { RedlockError } from './core/errors.js';
import { Redlock } from './core/redlock.js';
import { lockHttpException, setRetryAfter } from './lock-http-exception.js';
import { LockPlanner, type LockPlan } from './lock-plan.js';
import { observeLocked } from './locked-call.js';
import type { RedlockSettings } from './module-settings.js';
import { REDLOCK_SETTINGS, WITH_LOCK } from './redlock.constants.js';
import { RouteArgs } from './route-args.js';

/**
 * Applies `@WithLock` to controller handlers (registered by `RedlockModule` as a global
 * interceptor; handlers without the decorator pass straight through). The lock is taken before
 * the handler runs and held until its result completes, errors, or is unsubscribed.
 *
 * In HTTP contexts a lock that cannot be taken becomes 409 (held elsewhere, with `Retry-After`)
 * or 503 (too few masters); elsewhere the core error is thrown as is. To change that, set the
 * `errorMapper` option, or subclass and override `toHttpException` and register the subclass
 * with `RedlockModule.forRoot({ ..., interceptor: MyInterceptor })`.
 */
@Injectable()
export class RedlockInterceptor implements NestInterceptor {
  readonly #routeArgs = new WeakMap<Function, RouteArgs>();

  constructor(
    protected readonly redlock: Redlock,
    protected readonly planner: LockPlanner,
    protected readonly reflector: Reflector,
    @Inject(REDLOCK_SETTINGS) protected readonly settings: RedlockSettings,
    @Optional() protected readonly adapterHost?: HttpAdapterHost,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const handler = context.getHandler();
    if (!this.reflector.get(WITH_LOCK, handler)) return next.handle();
    let plan: LockPlan;
    let args: readonly unknown[];
    try {
      const owner = context.getClass();
      plan = this.planner.planFor(owner, handler.name, handler)!;
      // HTTP handlers get their arguments from parameter decorators, resolved after interceptors
      // run; other transports (RPC) hand the handler the context's arguments as they are.
      args = context.getType() === 'http' ? this.routeArgs(owner, handler).read(context, plan.key.argIndexes) : context.getArgs();
    } catch (error) {
      return throwError(() => error);
    }
    return observeLocked(this.redlock, plan, args, () => next.handle(), {
      mapAcquireError: (error) => this.mapError(error, context),
    });
  }

  /**
   * The default HTTP mapping of a lock that could not be taken: 409 with `Retry-After` when
   * another owner holds it, 503 when too few masters answered; anything else unchanged.
   */
  protected toHttpException(error: RedlockError, context: ExecutionContext): unknown {
    const exception = lockHttpException(error);
    if (!exception) return error;
    setRetryAfter(exception, context.switchToHttp().getResponse(), this.adapterHost);
    return exception;
  }

  private mapError(error: unknown, context: ExecutionContext): unknown {
    if (!(error instanceof RedlockError)) return error;
    if (this.settings.errorMapper) return this.settings.errorMapper(error, context);
    return context.getType() === 'http' ? this.toHttpException(error, context) : error;
  }

  private routeArgs(owner: Function, handler: Function): RouteArgs {
    let routeArgs = this.#routeArgs.get(handler);
    if (!routeArgs) {
      routeArgs = new RouteArgs(owner, handler.name);
      this.#routeArgs.set(handler, routeArgs);
    }
    return routeArgs;
  }
}
