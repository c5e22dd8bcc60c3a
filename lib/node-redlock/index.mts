// The ESM entry of `nestjs-redlock/node-redlock`: the CommonJS build, re-exported (see ../index.mts).
// Its default export by name: importing CommonJS, Node gives `module.exports` as the default.
export {
  ExecutionError,
  Lock,
  Redlock,
  Redlock as default,
  ResourceLockedError,
  type Client,
  type ClientExecutionResult,
  type ExecutionResult,
  type ExecutionStats,
  type LockOwner,
  type LockSummary,
  type RedlockAbortSignal,
  type Settings,
} from './index.js';
