import { Logger, type OnApplicationBootstrap } from '@nestjs/common';
import type { RedlockLogger } from './core/lock/redlock-options.js';
import { describeMasters, type MasterHealth } from './core/voters/master-health.js';
import type { RedlockEngine } from './core/redlock-engine.js';
import { debugOf } from './module-settings.js';

/** How the engine words a master's restart quarantine (Redlock's 'quarantine' notice). */
const QUARANTINE_NOTICE = /^redlock: master \S+ .*; its votes do not count for \d+ ms/;

/**
 * The one line at bootstrap on when locking becomes available and why. On a fresh deployment
 * every master is younger than the restart quarantine, and the first requests would otherwise
 * wait (or a job skip) without a word.
 *
 * It is made at `onApplicationBootstrap`, not when the engine is created: the quarantine must
 * cover the longest ttl the app declares, and the `@WithLock` ttls are known only once the
 * explorer has planned every decorated method (`onModuleInit`). Until then the engine's own
 * per-master quarantine warnings, which name a window computed from the ttls known so far, go
 * to debug; the announcement's per-master detail goes there too, with the final window.
 */
export class AvailabilityAnnouncement implements OnApplicationBootstrap {
  readonly #logger = new Logger('Redlock');
  #engine: RedlockEngine | undefined;
  #announced = false;
  /** What the engine writes its warnings to: the module's logger, quieter until the announcement. */
  readonly engineLogger: RedlockLogger;

  constructor(logger: RedlockLogger) {
    const debug = debugOf(logger);
    this.engineLogger = {
      warn: (message: string) => {
        if (!this.#announced && QUARANTINE_NOTICE.test(message)) debug?.(message);
        else logger.warn(message);
      },
    };
  }

  /** The engine to report on, once it has verified its masters. */
  watch(engine: RedlockEngine): void {
    this.#engine = engine;
  }

  async onApplicationBootstrap(): Promise<void> {
    const engine = this.#engine;
    if (!engine || this.#announced) return;
    try {
      const report = await engine.checkMasters();
      for (const master of report.masters) this.#logger.debug(`Master ${master.node}: ${describeMaster(master)}`);
      const summary = describeMasters(report);
      if (report.available) {
        this.#logger.log(`Locking available: ${summary}`);
      } else if (report.availableInMs !== undefined) {
        const at = new Date(Date.now() + report.availableInMs).toISOString();
        this.#logger.warn(
          `Locking paused until ${at}: ${summary}. A master that restarted may have forgotten live locks, so its votes ` +
            `count once every lock it could have forgotten has expired (restartQuarantineMs; by default the longest ttl ` +
            `the app declares); callers that can wait that long will.`,
        );
      } else {
        this.#logger.warn(`Locking unavailable: ${summary}`);
      }
    } finally {
      this.#announced = true;
    }
  }
}

function describeMaster(master: MasterHealth): string {
  if (!master.reachable) return `unreachable (${master.error ?? 'no reply'})`;
  if (master.sameServerAs !== undefined) return `the same server as ${master.sameServerAs}; its votes never count`;
  if (master.quarantinedForMs !== undefined) return `in restart quarantine for ${master.quarantinedForMs} ms more`;
  if (!master.votes) return `does not vote (${master.error ?? 'unknown'})`;
  return master.shardsQuarantinedForMs === undefined
    ? 'votes'
    : `votes, but a shard is in restart quarantine for ${master.shardsQuarantinedForMs} ms more`;
}
