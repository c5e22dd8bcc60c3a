export { lockWsException } from './lock-ws-exception.js';
export type { LockErrorPayload } from '../lock-error-payload.js';
