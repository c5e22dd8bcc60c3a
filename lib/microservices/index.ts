export { lockRpcException } from './lock-rpc-exception.js';
export type { LockErrorPayload } from '../lock-error-payload.js';
