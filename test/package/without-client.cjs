// `node test/package/without-client.cjs <ioredis|redis> <redis:// URL>`: the built package (dist/)
// in a process where one client library cannot be found, as in an app that did not install that
// optional peer. Prints what connecting with the missing library gave, and whether a lock could be
// taken and released with the other one.
const Module = require('node:module');

const [missing, url] = process.argv.slice(2);
const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  // `redis` is a facade over @redis/*: none of it is there.
  if (request === missing || request.startsWith(`@${missing}/`)) {
    const error = new Error(`Cannot find module '${request}'`);
    error.code = 'MODULE_NOT_FOUND';
    throw error;
  }
  return resolveFilename.call(this, request, ...rest);
};

require('reflect-metadata');
// Both entries load: nothing requires a client library when the package is loaded.
const { Redlock } = require('../../dist/core/index.js');
require('../../dist/index.js');
const { RedisConnections } = require('../../dist/redis-connections.js');

const silent = { log() {}, warn() {}, error() {} };
const [absent, present] = missing === 'redis' ? ['node-redis', 'ioredis'] : ['ioredis', 'node-redis'];

(async () => {
  const refused = await RedisConnections.open([url], silent, absent).then(
    async (connections) => {
      await connections.close();
      return 'opened';
    },
    (error) => `${error.constructor.name}: ${error.message}`,
  );
  const connections = await RedisConnections.open([url], silent, present);
  const redlock = new Redlock(connections.clients, { restartQuarantineMs: false });
  const lock = await redlock.acquire('optional-peer', 5_000);
  const released = await lock.release();
  redlock.close();
  await connections.close();
  process.stdout.write(JSON.stringify({ refused, released: released.heldUntilRelease }));
})().catch((error) => {
  process.stderr.write(String(error && error.stack));
  process.exit(1);
});
