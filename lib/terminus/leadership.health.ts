import { Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { InvalidArgumentError } from '../core/base/errors.js';
import { errorText } from '../core/voters/redis-node.js';
import { LeadershipService } from '../leadership.service.js';

/** Options of `LeadershipHealthIndicator.isHealthy`. */
export interface LeadershipHealthOptions {
  /**
   * Report `down` while nobody leads an election. Off by default: every replica would report
   * down at once during a takeover, and a liveness probe would then restart them all.
   */
  requireLeader?: boolean;
}

/**
 * A `@nestjs/terminus` health indicator of elections: per election, who leads (identity, term,
 * lease left), whether it is this replica, and for how long it has led. `up` unless the masters
 * cannot say (too few answer), or, with `requireLeader`, nobody leads. It writes nothing.
 *
 * ```ts
 * this.health.check([() => this.leadership.isHealthy('leadership', ['billing-consumer'])])
 * // in the module: imports: [TerminusModule], providers: [LeadershipHealthIndicator]
 * ```
 */
@Injectable()
export class LeadershipHealthIndicator {
  constructor(
    private readonly leadership: LeadershipService,
    private readonly indicators: HealthIndicatorService,
  ) {}

  /** Asks the masters who leads each election and reports it under `key`. */
  async isHealthy<const Key extends string = 'leadership'>(key: Key, elections: readonly string[], options: LeadershipHealthOptions = {}) {
    if (!Array.isArray(elections) || elections.some((name) => typeof name !== 'string' || name.length === 0)) {
      throw new InvalidArgumentError('elections', elections, "expected an array of election names like ['billing-consumer']");
    }
    if (options === null || typeof options !== 'object') {
      throw new InvalidArgumentError('options', options, 'expected an object like { requireLeader: true }');
    }
    const session = this.indicators.check(key);
    const data: Record<string, unknown> = {};
    const problems: string[] = [];
    await Promise.all(
      elections.map(async (name) => {
        const mine = this.leadership.leadership(name);
        try {
          const leader = await this.leadership.leader(name);
          data[name] = {
            leader: leader?.identity ?? null,
            ...(leader ? { term: leader.term, leaseRemainingMs: leader.leaseRemainingMs } : {}),
            thisReplica: mine !== undefined,
            ...(mine ? { leadingForMs: mine.heldMs } : {}),
          };
          if (!leader && options.requireLeader) problems.push(`nobody leads ${name}`);
        } catch (error) {
          data[name] = { leader: null, thisReplica: mine !== undefined, error: errorText(error) };
          problems.push(`who leads ${name} is unknown: ${errorText(error)}`);
        }
      }),
    );
    if (problems.length === 0) return session.up(data);
    data['message'] = problems.join('; ');
    return session.down(data);
  }
}
