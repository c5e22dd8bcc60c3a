export { RedlockTelemetry, type RedlockTelemetryOptions } from './redlock-telemetry.js';
export * from './telemetry.constants.js';
export type {
  AcquireObserver,
  AcquireOutcome,
  CallObserver,
  CallOutcome,
  ExtensionOutcome,
  LostReason,
  MasterAddress,
  MasterFailure,
  MasterOperation,
  RedlockInstrumentation,
} from '../core/lock/instrumentation.js';
