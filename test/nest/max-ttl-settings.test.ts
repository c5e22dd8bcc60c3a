import { expect, it } from 'vitest';
import { resolveSettings } from '../../lib/module-settings.js';

// The module's ttls follow the engine's cap: 24 h unless maxTtlMs raises it (checked at
// bootstrap, before any connection is opened).

const DAY = 24 * 60 * 60 * 1000;

it('refuses a default ttl over 24 h, and takes one up to a raised maxTtlMs', () => {
  expect(() => resolveSettings({ nodes: ['redis://127.0.0.1:1'], defaultTtlMs: 1.5 * DAY })).toThrow(/at most 86400000 as maxTtlMs allows \(got 129600000\)/);
  const settings = resolveSettings({ nodes: ['redis://127.0.0.1:1'], defaultTtlMs: 1.5 * DAY, maxTtlMs: 2 * DAY });
  expect(settings).toMatchObject({ defaultTtlMs: 1.5 * DAY, maxTtlMs: 2 * DAY });
  expect(() => resolveSettings({ nodes: ['redis://127.0.0.1:1'], maxTtlMs: -1 })).toThrow(/maxTtlMs/);
});
