import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { RedisFleet } from '../support/redis-fleet.js';

// ioredis and redis are both optional peers: the built package (dist/, as `npm run build` leaves
// it) loads without either, connects with the one installed, and says which package to install
// when the options ask for the other.

const SCRIPT = fileURLToPath(new URL('./without-client.cjs', import.meta.url));
let fleet: RedisFleet;

beforeAll(async () => {
  fleet = await RedisFleet.start(1);
});

afterAll(async () => {
  await fleet?.stopAll();
});

it.each([
  ['redis', 'node-redis'],
  ['ioredis', 'ioredis'],
])('without %s installed, the package loads, locks with the other client, and asks for %s when options need it', async (missing, library) => {
  const { stdout } = await promisify(execFile)(process.execPath, [SCRIPT, missing, fleet.urls()[0]!]);
  expect(JSON.parse(stdout)).toEqual({
    refused: `RedlockConfigError: RedlockModule: options.nodes[0]: connecting with ${library} needs the ${missing} package, which cannot be loaded; install it (npm install ${missing})`,
    released: true,
  });
});
