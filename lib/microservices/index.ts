export { lockRpcException } from './lock-rpc-exception.js';
export type { LockErrorPayload } from '../errors/lock-error-payload.js';
export type { RedlockErrorCode } from '../core/index.js';
