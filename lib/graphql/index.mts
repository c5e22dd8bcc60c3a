// The ESM entry of `nestjs-redlock/graphql`: the CommonJS build, re-exported (see ../index.mts).
export {
  lockGraphQLError,
  type LockErrorPayload,
  type RedlockErrorCode,
} from './index.js';
