import { setTimeout as sleep } from 'node:timers/promises';
import { call } from './http.js';

/** What the sample app's readiness route (@nestjs/terminus) answers. */
export interface Readiness {
  status?: string;
  info?: Record<string, { status: string }>;
  error?: Record<string, { status: string; message?: string; availableInMs?: number }>;
}

/**
 * Polls every replica's /health until each is ready: the store answers and a quorum of lock
 * masters can grant a lock now (none down, none in restart quarantine beyond what a quorum spares).
 */
export async function allCanLock(urls: readonly string[], timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answers = await Promise.all(urls.map((url) => call<Readiness>('GET', `${url}/health`)));
    if (answers.every((answer) => answer.status === 200 && answer.body.info?.['redlock']?.status === 'up')) return true;
    if (Date.now() >= deadline) return false;
    await sleep(100);
  }
}

/** Why locking is not available, as the readiness route says it. */
export function lockingDown(answer: { status: number; body: Readiness }): string {
  return answer.status === 200 ? 'ready' : `${answer.status}: ${answer.body.error?.['redlock']?.message ?? 'not ready'}`;
}
