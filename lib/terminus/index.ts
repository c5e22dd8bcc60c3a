export { RedlockHealthIndicator, type RedlockHealthOptions } from './redlock.health.js';
export type { MasterHealth, MastersHealth } from '../core/index.js';
