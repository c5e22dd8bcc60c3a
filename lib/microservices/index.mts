// The ESM entry of `nestjs-redlock/microservices`: the CommonJS build, re-exported (see ../index.mts).
export {
  lockRpcException,
  type LockErrorPayload,
  type RedlockErrorCode,
} from './index.js';
