import 'reflect-metadata';
import { Controller, Get, Injectable, Param } from '@nestjs/common';
import { RedlockService, WithLock } from '../../lib/index.js';
import { ConcurrencyProbe } from '../nest/nest-helpers.js';

// The application the lock contract drives: routes and a provider under @WithLock, one per policy.

export const HOLD_TTL_MS = 2_000;
/** The other owner's ttl when it should outlast the test: Retry-After is at most this. */
export const ELSEWHERE_TTL_MS = 30_000;

export const probes = { route: new ConcurrencyProbe() };
/** What the skipping methods below ran, by id: a skipped call runs nothing. */
export const ran: string[] = [];

@Controller('contract')
export class ContractController {
  constructor(private readonly redlock: RedlockService) {}

  @Get('try/:id')
  @WithLock('route:{0}', { ttlMs: HOLD_TTL_MS, onLocked: 'fail' })
  try(@Param('id') id: string) {
    return { got: id, lock: this.redlock.currentLock()?.resources };
  }

  @Get('wait-briefly/:id')
  @WithLock('route:{0}', { ttlMs: HOLD_TTL_MS, waitTimeoutMs: 100 })
  waitBriefly(@Param('id') id: string) {
    return { got: id };
  }

  @Get('skip/:id')
  @WithLock('route:{0}', { ttlMs: HOLD_TTL_MS, onLocked: 'skip' })
  skip(@Param('id') id: string) {
    ran.push(`route:${id}`);
    return { got: id };
  }

  @Get('locked/:id')
  @WithLock('route:{0}', HOLD_TTL_MS)
  async locked(@Param('id') _id: string) {
    await probes.route.section(5);
    return { ok: true };
  }
}

@Injectable()
export class ContractJobs {
  constructor(private readonly redlock: RedlockService) {}

  @WithLock('job:{0}', { ttlMs: HOLD_TTL_MS, onLocked: 'fail' })
  async failFast(id: string) {
    return { ran: id, lock: this.redlock.currentLock()?.resources };
  }

  @WithLock('job:{0}', { ttlMs: HOLD_TTL_MS, onLocked: 'skip' })
  async skipWhenBusy(id: string) {
    ran.push(`job:${id}`);
    return { ran: id };
  }

  @WithLock('job:{0}', { ttlMs: HOLD_TTL_MS, waitTimeoutMs: 10_000 })
  async patient(id: string) {
    return { ran: id, lock: this.redlock.currentLock()?.resources };
  }
}
