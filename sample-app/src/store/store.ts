import type { OnApplicationShutdown } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';

const QUIT_GRACE_MS = 1_000;

/**
 * The wallet's data, shared by every replica: a Redis of its own (STORE_URL), kept apart from the
 * lock masters. The locks are only worth something if all replicas read and write the same data;
 * and a store on a lock master would go down with it, mixing "data unavailable" into what the
 * demo shows about losing lock masters.
 */
export class Store implements OnApplicationShutdown {
  readonly redis: Redis;

  constructor(url: string, keyPrefix: string) {
    this.redis = new Redis(url, { keyPrefix, maxRetriesPerRequest: 2 });
    // Connection errors surface on the commands that fail; ioredis reconnects by itself.
    this.redis.on('error', () => {});
  }

  /** Redis' own clock, in microseconds: one clock for every replica. */
  async nowUs(): Promise<number> {
    const [seconds, micros] = await this.redis.time();
    return Number(seconds) * 1_000_000 + Number(micros);
  }

  /**
   * QUIT politely when connected; never wait on a store that is down (ioredis would hold the
   * QUIT in its offline queue until a reconnection that may never come, and so hold up shutdown).
   */
  async onApplicationShutdown(): Promise<void> {
    if (this.redis.status === 'ready') {
      await Promise.race([this.redis.quit().catch(() => undefined), sleep(QUIT_GRACE_MS, undefined, { ref: false })]);
    }
    this.redis.disconnect();
  }
}
