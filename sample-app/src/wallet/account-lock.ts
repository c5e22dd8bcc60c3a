/**
 * The one lock resource per account. Withdrawals (@WithLock template) and transfers
 * (RedlockService, by hand) must name the very same resource, or they would not exclude each
 * other.
 */
export const ACCOUNT_LOCK = 'account:{0}';

export function accountLock(id: string): string {
  return `account:${id}`;
}

/**
 * Writing needs the lock to stay valid a little longer than the write takes: a lock that is
 * about to expire could be taken by another replica before our write lands.
 */
export const MIN_VALIDITY_FOR_WRITE_MS = 200;
