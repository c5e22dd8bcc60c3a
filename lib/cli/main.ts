#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { Redlock, type LockInspection, type RedlockOptions } from '../core/index.js';
import { redactCredentials } from '../core/base/redact.js';
import { within } from '../core/base/within.js';
import { probePermissions, type Permissions } from '../core/voters/permission-probe.js';
import { masterClientOf } from '../core/voters/clients/clients.js';

// `npx nestjs-redlock <command>`: what an operator needs when a lock is stuck. Reads the masters
// (inspect, waiters, masters) or breaks one lock (release --force). Never prints a credential or
// a token: masters are named by host and port, holders by a fingerprint of their token.

const USAGE = `Usage: nestjs-redlock <command> [options]

Commands:
  inspect <resource...>       Is it held, by what kind of lock, until when, its fence, how many wait.
  waiters <resource>          Who waits in the resource's fair queue, first in line first.
  masters                     Each master: reachable, round trip, restart quarantine, duplicates,
                              and whether the connection's user may run every command the engine needs.
  release <resource> --force  Break a stuck lock whoever holds it, and raise its fence so the old
                              holder's fenced writes are refused once the next holder writes.

Options:
  --nodes <urls>       Comma-separated redis:// URLs of the masters (default: $REDLOCK_NODES).
  --key-prefix <p>     The engine's keyPrefix, if the app sets one (default "redlock:").
  --timeout <ms>       How long each master may take to answer (default 1000).
  --json               Print JSON (for scripts).
  --force              Required by release.
  -h, --help           This help.

Exit codes: 0 done (and every answer known); 1 done, but an answer is unknown (masters disagree)
or a permission is missing; 2 usage error; 3 too few masters answered.
`;

const EXIT = { ok: 0, unknown: 1, usage: 2, masters: 3 } as const;

class UsageError extends Error {}

function parse(argv: readonly string[]) {
  try {
    return parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        nodes: { type: 'string' },
        'key-prefix': { type: 'string' },
        timeout: { type: 'string' },
        json: { type: 'boolean', default: false },
        force: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** Writes a line to stdout. */
const say = (line = '') => process.stdout.write(`${line}\n`);

async function main(argv: readonly string[]): Promise<number> {
  const { values, positionals } = parse(argv);
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    (values.help ? say : (line: string) => process.stderr.write(`${line}\n`))(USAGE.trimEnd());
    return values.help ? EXIT.ok : EXIT.usage;
  }
  const urls = (values.nodes ?? process.env['REDLOCK_NODES'] ?? '').split(',').map((url) => url.trim()).filter(Boolean);
  if (urls.length === 0) throw new UsageError('no masters: give --nodes redis://a:6379,redis://b:6379,redis://c:6379 or set REDLOCK_NODES');
  const timeoutMs = values.timeout === undefined ? 1_000 : Number(values.timeout);
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new UsageError(`--timeout must be a whole number of ms (got ${values.timeout})`);
  const needs = { inspect: 'one or more resources', waiters: 'one resource', masters: 'nothing', release: 'one resource' } as const;
  if (!(command in needs)) throw new UsageError(`unknown command '${command}' (inspect, waiters, masters, release)`);
  const arity = command === 'inspect' ? rest.length >= 1 : command === 'masters' ? rest.length === 0 : rest.length === 1;
  if (!arity) throw new UsageError(`${command} takes ${needs[command as keyof typeof needs]}`);
  if (command === 'release' && !values.force) {
    throw new UsageError('release breaks a lock whoever holds it: add --force if that is what you want');
  }

  const clients = urls.map((url) => new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null }));
  for (const client of clients) client.on('error', () => {});
  await Promise.all(clients.map((client) => client.connect().catch(() => {})));
  const warnings: string[] = [];
  const options: RedlockOptions = {
    nodeTimeoutMs: timeoutMs,
    wakeups: false,
    logger: { warn: (message) => warnings.push(message) },
    ...(values['key-prefix'] === undefined ? {} : { keyPrefix: values['key-prefix'] }),
  };
  const redlock = new Redlock(clients, options);
  try {
    if (command === 'inspect') return await inspect(redlock, rest, values.json);
    if (command === 'waiters') return await waiters(redlock, rest[0]!, values.json);
    if (command === 'masters') return await masters(redlock, clients, timeoutMs, values.json);
    return await release(redlock, rest[0]!, values.json);
  } finally {
    redlock.close();
    for (const client of clients) client.disconnect();
  }
}

async function inspect(redlock: Redlock, resources: readonly string[], json: boolean): Promise<number> {
  const seen = await redlock.inspect(resources);
  if (json) say(JSON.stringify(seen, null, 2));
  else for (const resource of seen) describe(resource);
  const answered = (resource: LockInspection) => resource.masters.filter((master) => master.state !== 'unknown').length;
  if (seen.some((resource) => answered(resource) < redlock.quorum)) return EXIT.masters;
  return seen.some((resource) => resource.state === 'unknown') ? EXIT.unknown : EXIT.ok;
}

function describe(seen: LockInspection): void {
  const parts: string[] = [];
  if (seen.kind === 'exclusive') parts.push(`exclusive, holder ${seen.holder ?? '(masters disagree)'}`);
  if (seen.kind === 'read') parts.push(`${seen.holders} reader(s)`);
  if (seen.kind === 'permits') parts.push(seen.used === seen.holders ? `${seen.used} of ${seen.limit} permits` : `${seen.used} of ${seen.limit} permits, by ${seen.holders} holder(s)`);
  if (seen.freesInMs) parts.push(`frees in ${seen.freesInMs.earliestMs}-${seen.freesInMs.latestMs} ms`);
  if (seen.fence !== undefined) parts.push(`fence ${seen.fence}`);
  parts.push(`${seen.waiting} waiting`);
  say(`${seen.resource}: ${seen.state} (${parts.join(', ')})`);
  for (const master of seen.masters) {
    const detail = master.error ?? [master.kind, master.remainingMs === undefined ? '' : `${master.remainingMs} ms`].filter(Boolean).join(' ');
    say(`  ${master.node}: ${master.state}${detail ? ` ${detail}` : ''}`);
  }
}

async function waiters(redlock: Redlock, resource: string, json: boolean): Promise<number> {
  const { waiters: queued, answered } = await redlock.waiters(resource);
  if (json) say(JSON.stringify({ resource, answered, waiters: queued }, null, 2));
  else {
    say(`${resource}: ${queued.length} waiting (${answered} of ${redlock.nodes.length} masters answered)`);
    for (const waiter of queued) say(`  ${waiter.id} ticket ${waiter.ticket}${waiter.kind ? ` (${waiter.kind})` : ''}, on ${waiter.masters} master(s), stays ${waiter.staysMs} ms`);
  }
  return answered < redlock.quorum ? EXIT.masters : EXIT.ok;
}

async function masters(redlock: Redlock, clients: readonly Redis[], timeoutMs: number, json: boolean): Promise<number> {
  const health = await redlock.checkMasters(timeoutMs);
  const unchecked: Permissions = { checked: false, denied: [] };
  // Each probe is a dozen commands: a master that stops answering midway is left unchecked, not waited for.
  const permissions: Permissions[] = await Promise.all(
    clients.map((client, index) =>
      health.masters[index]!.reachable ? within(probePermissions(masterClientOf(client), redlock.options), 10 * timeoutMs, () => unchecked) : unchecked,
    ),
  );
  const report = { ...health, masters: health.masters.map((master, index) => ({ ...master, permissions: permissions[index]! })) };
  if (json) say(JSON.stringify(report, null, 2));
  else {
    say(`${health.voting} of ${health.masters.length} masters can vote; a lock needs ${health.quorum}${health.available ? '' : ' (locking paused)'}`);
    for (const master of report.masters) {
      const state = !master.reachable
        ? `unreachable: ${master.error}`
        : [
            `round trip ${master.roundTripMs} ms`,
            master.votes ? 'votes' : `does not vote: ${master.error}`,
            master.permissions.denied.length ? `denied: ${master.permissions.denied.join(', ')}` : 'every command allowed',
          ].join(', ');
      say(`  ${master.node}: ${state}`);
    }
  }
  if (!health.available && health.masters.filter((master) => master.reachable).length < health.quorum) return EXIT.masters;
  const denied = permissions.some((entry) => entry.denied.length > 0);
  return denied || !health.available ? EXIT.unknown : EXIT.ok;
}

async function release(redlock: Redlock, resource: string, json: boolean): Promise<number> {
  const forced = await redlock.forceRelease(resource);
  if (json) say(JSON.stringify(forced, null, 2));
  else {
    say(`${resource}: ${forced.freedOn ? `broken on ${forced.freedOn} master(s)` : 'was not held'}; fence raised to ${forced.fence ?? '(no master answered)'}`);
    for (const master of forced.masters) say(`  ${master.node}: ${master.error ?? (master.freed ? 'hold removed' : 'nothing held')}`);
  }
  return forced.answered < redlock.quorum ? EXIT.masters : EXIT.ok;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`nestjs-redlock: ${redactCredentials((error as Error).message)}\n`);
    if (error instanceof UsageError) process.stderr.write('Run nestjs-redlock --help for the commands and options.\n');
    process.exitCode = error instanceof UsageError ? EXIT.usage : EXIT.masters;
  },
);
