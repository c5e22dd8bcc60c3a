import { ConfigService } from '@nestjs/config';
import type { RedlockModuleOptions } from 'nestjs-redlock';
import type { SampleConfig } from './configuration.js';

/**
 * RedlockModule.forRootAsync's factory: the lock masters and ttl come from configuration, like
 * any other connection setting, instead of being written into the module.
 */
export function redlockOptions(config: ConfigService<SampleConfig, true>): RedlockModuleOptions {
  const { nodes, ttlMs, restartQuarantineMs, nodeTimeoutMs } = config.get('redlock', { infer: true });
  return {
    nodes,
    defaultTtlMs: ttlMs,
    // Left to the engine's defaults unless configured: see REDLOCK_RESTART_QUARANTINE, LOCK_NODE_TIMEOUT_MS.
    ...(restartQuarantineMs === undefined ? {} : { restartQuarantineMs }),
    ...(nodeTimeoutMs === undefined ? {} : { nodeTimeoutMs }),
  };
}
