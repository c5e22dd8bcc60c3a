import { randomBytes } from 'node:crypto';

/** 128 bits from the OS CSPRNG: unique across every client and every attempt. */
export function newToken(): string {
  return randomBytes(16).toString('base64url');
}
