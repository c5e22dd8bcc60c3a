import { randomBytes } from 'node:crypto';

const POOL_TOKENS = 256;
let pool = Buffer.alloc(0);
let offset = 0;

/**
 * 128 bits from the OS CSPRNG: unique across every client and every attempt. Drawn from a
 * pool refilled 4 KiB at a time, which keeps the CSPRNG call off most acquisitions.
 */
export function newToken(): string {
  if (offset >= pool.length) {
    pool = randomBytes(16 * POOL_TOKENS);
    offset = 0;
  }
  const token = pool.toString('base64url', offset, offset + 16);
  offset += 16;
  return token;
}

/**
 * This process among all clients of the masters: the first part of its waiter ids, and the
 * name of the channel its queue heads are woken on. base64url, so it never contains ':'.
 */
export const PROCESS_ID = randomBytes(9).toString('base64url');
