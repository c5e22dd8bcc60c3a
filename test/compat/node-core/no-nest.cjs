// What `npm install nestjs-redlock ioredis` gives a worker that has no Nest: npm installs every
// peer dependency not marked optional, so this holds only while the Nest peers (and rxjs,
// reflect-metadata, which only the Nest side uses, and @opentelemetry/api, which only the
// opentelemetry entry uses) are optional in peerDependenciesMeta.
const assert = require('node:assert/strict');
const { existsSync } = require('node:fs');
const { join } = require('node:path');

const installed = ['@nestjs/common', '@nestjs/core', 'rxjs', 'reflect-metadata', '@opentelemetry/api'].filter((name) =>
  existsSync(join(__dirname, 'node_modules', name)),
);
assert.deepEqual(
  installed,
  [],
  `installing nestjs-redlock next to ioredis also installed ${installed.join(', ')}: mark them optional in peerDependenciesMeta`,
);
// Without Nest only the engine can load: the root entry needs @nestjs/common.
assert.throws(() => require('nestjs-redlock'), /@nestjs\/(common|core)/);
// nestjs-redlock/core loaded in check-cjs.cjs without it; only the opentelemetry entry needs the API.
assert.throws(() => require('nestjs-redlock/opentelemetry'), /@opentelemetry\/api/);
console.log('no Nest or OpenTelemetry package installed; nestjs-redlock/core loads, the root entry needs Nest and /opentelemetry the API, as expected');
