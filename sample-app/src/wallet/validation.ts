import { BadRequestException } from '@nestjs/common';

const ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Account ids become store keys and lock resources: keep them to a plain alphabet. */
export function accountId(value: unknown): string {
  if (typeof value !== 'string' || !ID.test(value)) {
    throw new BadRequestException('account id must be 1-64 letters, digits, "_" or "-"');
  }
  return value;
}

/** Money is counted in whole units (cents, say): no floating-point rounding in balances. */
export function amount(value: unknown, name = 'amount', min = 1): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new BadRequestException(`${name} must be an integer >= ${min}`);
  }
  return value;
}
