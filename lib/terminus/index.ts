export { RedlockHealthIndicator, type RedlockHealthOptions } from './redlock.health.js';
export { LeadershipHealthIndicator, type LeadershipHealthOptions } from './leadership.health.js';
export type { MasterHealth, MastersHealth } from '../core/index.js';
