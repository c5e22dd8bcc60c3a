import type { HandlerTransport } from '../handler-args.js';

type LockExceptionOf = (error: unknown) => unknown;

/**
 * Each transport's mapping, loaded on first use. The transport packages (@nestjs/microservices,
 * @nestjs/websockets, graphql) are optional peers: the root entry must load without them, and an
 * app whose handler runs in one of these contexts has that package. The CommonJS build turns
 * these imports into `require`s of the subpath that run only when called.
 */
const LOADERS: Readonly<Record<Exclude<HandlerTransport, 'http'>, () => Promise<LockExceptionOf>>> = {
  rpc: async () => (await import('../microservices/index.js')).lockRpcException,
  ws: async () => (await import('../websockets/index.js')).lockWsException,
  graphql: async () => (await import('../graphql/index.js')).lockGraphQLError,
};

const loaded = new Map<string, Promise<LockExceptionOf>>();

/**
 * What a message, websocket or GraphQL handler throws for a lock error: `RpcException`,
 * `WsException` or `GraphQLError` (see the transport subpaths); the error unchanged for another
 * context type or an error that is not about the lock.
 */
export async function transportLockException(error: unknown, transport: string): Promise<unknown> {
  const load = (LOADERS as Partial<Record<string, () => Promise<LockExceptionOf>>>)[transport];
  if (!load) return error;
  let mapping = loaded.get(transport);
  if (!mapping) {
    mapping = load();
    loaded.set(transport, mapping);
  }
  return (await mapping)(error) ?? error;
}
