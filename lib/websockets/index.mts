// The ESM entry of `nestjs-redlock/websockets`: the CommonJS build, re-exported (see ../index.mts).
export {
  lockWsException,
  type LockErrorPayload,
  type RedlockErrorCode,
} from './index.js';
