import type { ExecutionContext } from '@nestjs/common';
import { CUSTOM_ROUTE_ARGS_METADATA, METHOD_METADATA, ROUTE_ARGS_METADATA } from '@nestjs/common/constants.js';
import { RouteParamsFactory } from '@nestjs/core/router/route-params-factory.js';

/** The transports Nest dispatches handlers of, as `ExecutionContext.getType()` names them. */
export type HandlerTransport = 'http' | 'rpc' | 'ws' | 'graphql';

/**
 * Method metadata each transport's handler decorators set (@Get and friends, @MessagePattern /
 * @EventPattern, @SubscribeMessage, @Query / @Mutation / @Subscription / @ResolveField). The
 * transport packages are optional peers, so their keys are written here rather than imported.
 */
const HANDLER_METADATA: Readonly<Record<HandlerTransport, string>> = {
  http: METHOD_METADATA,
  rpc: 'microservices:pattern',
  ws: 'websockets:message_mapping',
  graphql: 'graphql:resolver_name',
};
/** Set with `Transport.GRPC` (4) by @GrpcMethod: Nest then passes undecorated handlers more arguments. */
const RPC_TRANSPORT_METADATA = 'microservices:transport';
const GRPC = 4;

interface ParamMetadata {
  readonly index: number;
  readonly data?: unknown;
  readonly factory?: (data: unknown, context: ExecutionContext) => unknown;
}

/** Where one parameter comes from: a built-in decorator of the transport (its numeric type), or a custom factory. */
interface ParamSource {
  readonly type: number | 'custom';
  readonly data: unknown;
  readonly factory: ParamMetadata['factory'];
}

/** How a transport's built-in parameter decorators read their value out of the context's arguments. */
type Exchange = (type: number, data: unknown, context: ExecutionContext) => unknown;

const routeParams = new RouteParamsFactory();

/** A property of a context argument when the decorator names one (`@Payload('id')`, `@Args('id')`). */
const pick = (value: unknown, data: unknown): unknown =>
  data ? (value as Record<string, unknown> | null | undefined)?.[data as string] : value;

/**
 * The same readings as Nest's own parameter factories (`RouteParamsFactory`, and the
 * `RpcParamsFactory`, `WsParamsFactory` and `GqlParamsFactory` that the transport packages keep
 * internal), by their public enums' values: RpcParamtype, WsParamtype, GqlParamtype.
 */
const EXCHANGES: Readonly<Record<HandlerTransport, Exchange>> = {
  http: (type, data, context) => {
    const http = context.switchToHttp();
    return routeParams.exchangeKeyForValue(type, data as string, {
      req: http.getRequest(),
      res: http.getResponse(),
      next: http.getNext(),
    });
  },
  rpc: (type, data, context) => {
    const [payload, rpcContext, grpcCall] = context.getArgs();
    switch (type) {
      case 3: // PAYLOAD
        return pick(payload, data);
      case 6: // CONTEXT
        return rpcContext;
      case 9: // GRPC_CALL
        return grpcCall;
      default:
        return null;
    }
  },
  ws: (type, data, context) => {
    const args = context.getArgs();
    switch (type) {
      case 0: // SOCKET
        return args[0];
      case 3: // PAYLOAD
        return pick(args[1], data);
      case 13: // ACK
        return args.find((arg) => typeof arg === 'function');
      default:
        return null;
    }
  },
  graphql: (type, data, context) => {
    const [root, args, gqlContext, info] = graphqlArgs(context.getArgs());
    switch (type) {
      case 0: // ROOT
        return root;
      case 3: // ARGS
        return pick(args, data);
      case 1: // CONTEXT
        return pick(gqlContext, data);
      case 2: // INFO
        return pick(info, data);
      default:
        return null;
    }
  },
};

/** Reference resolvers get (root, context, info), without an arguments object; Nest inserts one. */
function graphqlArgs(args: unknown[]): unknown[] {
  return args.length === 3 ? [args[0], undefined, args[1], args[2]] : args;
}

/**
 * The arguments a handler receives, as far as a lock key needs them, whatever transport calls
 * it: `{N}` is the handler's Nth parameter everywhere. Interceptors run before Nest builds the
 * handler's arguments, so they are read here from the context the way Nest's parameter
 * decorators read them (`@Param`, `@Body`, `@Payload`, `@Ctx`, `@ConnectedSocket`,
 * `@MessageBody`, `@Args`, `@Context`, custom decorators). Pipes are not applied: a key sees
 * `'42'`, not what `ParseIntPipe` makes of it (same string form).
 *
 * A handler without parameter decorators receives what Nest then passes: nothing over HTTP, the
 * payload on a message handler (payload, metadata and call for gRPC), socket, payload and ack
 * on a gateway, and root, args, context and info on a resolver.
 */
export class HandlerArgs {
  readonly #sources = new Map<number, ParamSource>();
  /** GraphQL handlers without parameter decorators get the context's arguments as they are. */
  readonly #passesContextArgs: boolean;

  constructor(
    owner: Function,
    method: Function,
    readonly transport: HandlerTransport,
  ) {
    const metadata = (Reflect.getMetadata(ROUTE_ARGS_METADATA, owner, method.name) ?? {}) as Record<string, ParamMetadata>;
    for (const [key, param] of Object.entries(metadata)) {
      const type = key.includes(CUSTOM_ROUTE_ARGS_METADATA) ? 'custom' : Number(key.split(':')[0]);
      this.#sources.set(param.index, { type, data: param.data, factory: param.factory });
    }
    const undecorated = this.#sources.size === 0;
    this.#passesContextArgs = undecorated && transport === 'graphql';
    if (!undecorated) return;
    for (const [index, type] of defaultParams(transport, method)) {
      this.#sources.set(index, { type, data: undefined, factory: undefined });
    }
  }

  /** The transport whose handler `method` is, or undefined for a method Nest does not dispatch. */
  static transportOf(method: Function): HandlerTransport | undefined {
    // Has, not get: @ResolveField() without a name records an undefined resolver name.
    return (Object.keys(HANDLER_METADATA) as HandlerTransport[]).find((transport) =>
      Reflect.hasMetadata(HANDLER_METADATA[transport], method),
    );
  }

  /** Whether the handler receives an argument at `index`; otherwise Nest passes undefined there. */
  has(index: number): boolean {
    return this.#passesContextArgs ? index < 4 : this.#sources.has(index);
  }

  /** The handler's arguments at `indexes` (all it receives when undefined); others stay undefined. */
  read(context: ExecutionContext, indexes: readonly number[] | undefined): unknown[] {
    if (this.#passesContextArgs) return context.getArgs();
    const exchange = EXCHANGES[this.transport];
    const args: unknown[] = [];
    for (const index of indexes ?? this.#sources.keys()) {
      const source = this.#sources.get(index);
      if (!source) continue;
      args[index] = source.type === 'custom' ? source.factory?.(source.data, context) : exchange(source.type, source.data, context);
    }
    return args;
  }
}

/** [index, built-in parameter type] of what Nest passes a handler that has no parameter decorators. */
function defaultParams(transport: HandlerTransport, method: Function): ReadonlyArray<readonly [number, number]> {
  switch (transport) {
    case 'rpc':
      return Reflect.getMetadata(RPC_TRANSPORT_METADATA, method) === GRPC
        ? [
            [0, 3],
            [1, 6],
            [2, 9],
          ]
        : [[0, 3]];
    case 'ws':
      return [
        [0, 0],
        [1, 3],
        [2, 13],
      ];
    default:
      return [];
  }
}
