import { setTimeout as sleep } from 'node:timers/promises';
import { call } from './http.js';

/**
 * Polls every replica's /health until each reports that a lock can be taken (checks once with a timeout of 0) (a quorum of masters
 * answers and counts): after masters restart, or at first with masters in restart quarantine.
 */
export async function allCanLock(urls: readonly string[], timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answers = await Promise.all(urls.map((url) => call<{ locks?: string }>('GET', `${url}/health`)));
    if (answers.every((answer) => answer.status === 200 && answer.body.locks === 'ok')) return true;
    if (Date.now() >= deadline) return false;
    await sleep(100);
  }
}
