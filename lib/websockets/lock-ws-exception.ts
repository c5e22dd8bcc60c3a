import { WsException } from '@nestjs/websockets';
import { lockErrorPayload } from '../errors/lock-error-payload.js';

/**
 * The websockets answer to a lock error (held elsewhere, too few masters, lost, or a key the
 * message cannot form): a `WsException` whose error is the `LockErrorPayload`, which Nest's
 * gateway exception filter sends to the client as an `exception` event. Undefined for any other
 * error. `RedlockInterceptor` applies it to `@WithLock` gateway handlers; use it for locks taken by hand.
 */
export function lockWsException(error: unknown): WsException | undefined {
  const payload = lockErrorPayload(error);
  return payload && new WsException({ ...payload });
}
