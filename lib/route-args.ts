import type { ExecutionContext } from '@nestjs/common';
import { CUSTOM_ROUTE_ARGS_METADATA, METHOD_METADATA, ROUTE_ARGS_METADATA } from '@nestjs/common/constants.js';
import { RouteParamsFactory } from '@nestjs/core/router/route-params-factory.js';

interface ParamMetadata {
  readonly index: number;
  readonly data?: unknown;
  readonly factory?: (data: unknown, context: ExecutionContext) => unknown;
}

interface ParamSource {
  readonly type: number | 'custom';
  readonly data: unknown;
  readonly factory: ParamMetadata['factory'];
}

const params = new RouteParamsFactory();

/**
 * The arguments of an HTTP route handler, as far as a key needs them. Interceptors run before
 * Nest resolves the handler's arguments, so they are read here from the request the same way
 * the parameter decorators (`@Param`, `@Query`, `@Body`, custom ones) read them; pipes are
 * not applied: a key sees `'42'`, not what `ParseIntPipe` makes of it (same string form).
 */
export class RouteArgs {
  readonly #sources = new Map<number, ParamSource>();

  constructor(owner: Function, methodName: string) {
    const metadata = (Reflect.getMetadata(ROUTE_ARGS_METADATA, owner, methodName) ?? {}) as Record<string, ParamMetadata>;
    for (const [key, param] of Object.entries(metadata)) {
      const type = key.includes(CUSTOM_ROUTE_ARGS_METADATA) ? 'custom' : Number(key.split(':')[0]);
      this.#sources.set(param.index, { type, data: param.data, factory: param.factory });
    }
  }

  /** True for HTTP route handlers (`@Get()` and friends), whose arguments come from decorators. */
  static isRoute(method: Function): boolean {
    return Reflect.getMetadata(METHOD_METADATA, method) !== undefined;
  }

  /** Whether a parameter decorator fills argument `index`; otherwise Nest passes undefined. */
  has(index: number): boolean {
    return this.#sources.has(index);
  }

  /** The handler's arguments at `indexes` (all decorated ones when undefined); others stay undefined. */
  read(context: ExecutionContext, indexes: readonly number[] | undefined): unknown[] {
    const http = context.switchToHttp();
    const req = http.getRequest<Record<string, any>>();
    const res = http.getResponse<Record<string, any>>();
    const next = http.getNext<Function>();
    const args: unknown[] = [];
    for (const index of indexes ?? this.#sources.keys()) {
      const source = this.#sources.get(index);
      if (!source) continue;
      args[index] =
        source.type === 'custom'
          ? source.factory?.(source.data, context)
          : params.exchangeKeyForValue(source.type, source.data as string, { req, res, next });
    }
    return args;
  }
}
