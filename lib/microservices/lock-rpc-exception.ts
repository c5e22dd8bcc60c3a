import { RpcException } from '@nestjs/microservices';
import { lockErrorPayload } from '../errors/lock-error-payload.js';

/**
 * The microservices answer to a lock error (held elsewhere, too few masters, lost, or a key the
 * message's payload cannot form): an `RpcException` whose error is the `LockErrorPayload`, which
 * a `ClientProxy` caller receives as the error of `send()`. Undefined for any other error.
 * `RedlockInterceptor` applies it to `@WithLock` message handlers; use it for locks taken by hand.
 */
export function lockRpcException(error: unknown): RpcException | undefined {
  const payload = lockErrorPayload(error);
  return payload && new RpcException({ ...payload });
}
