import { Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { InvalidArgumentError } from '../core/base/errors.js';
import { describeMasters, type MasterHealth } from '../core/voters/master-health.js';
import { Redlock } from '../core/redlock.js';

/** Options of `RedlockHealthIndicator.isHealthy`. */
export interface RedlockHealthOptions {
  /** How long each master's PING may take, in ms. Default 1000. */
  timeoutMs?: number;
}

/**
 * A `@nestjs/terminus` health indicator: `up` while a quorum of masters can vote now, `down`
 * otherwise, with what each master looks like (reachable, round trip, restart quarantine and for
 * how long, last error; never credentials). It takes no lock and writes no key.
 *
 * ```ts
 * @Controller('health')
 * class HealthController {
 *   constructor(private readonly health: HealthCheckService, private readonly redlock: RedlockHealthIndicator) {}
 *   @Get() @HealthCheck() check() { return this.health.check([() => this.redlock.isHealthy()]); }
 * }
 * // in the module: imports: [TerminusModule], providers: [RedlockHealthIndicator]
 * ```
 */
@Injectable()
export class RedlockHealthIndicator {
  constructor(
    private readonly redlock: Redlock,
    private readonly indicators: HealthIndicatorService,
  ) {}

  /**
   * PINGs every master (at most `timeoutMs` each) and reports under `key`: `up` while a quorum
   * can vote, otherwise `down`, which terminus answers with 503.
   */
  async isHealthy<const Key extends string = 'redlock'>(key: Key = 'redlock' as Key, options: RedlockHealthOptions = {}) {
    if (options === null || typeof options !== 'object') {
      throw new InvalidArgumentError('options', options, 'expected an object like { timeoutMs: 1000 }');
    }
    const report = await this.redlock.checkMasters(options.timeoutMs);
    const session = this.indicators.check(key);
    const data = { quorum: report.quorum, voting: report.voting, masters: byName(report.masters) };
    if (report.available) return session.up(data);
    const resumes = report.availableInMs === undefined ? {} : { availableInMs: report.availableInMs };
    return session.down({ ...data, ...resumes, message: describeMasters(report) });
  }
}

function byName(masters: readonly MasterHealth[]): Record<string, Omit<MasterHealth, 'node'>> {
  return Object.fromEntries(masters.map(({ node, ...rest }) => [node, rest]));
}
