import 'reflect-metadata';
import { Controller, Get, Injectable, Logger, Module, Param } from '@nestjs/common';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  DEFAULT_TTL_MS,
  RedlockConfigError,
  RedlockModule,
  type RedlockModuleOptions,
  type RedlockOptionsFactory,
  RedlockService,
  WithLock,
} from '../../lib/index.js';
import { RedisConnections } from '../../lib/redis-connections.js';
import { freePort } from '../support/free-port.js';
import { RedisFleet } from '../support/redis-fleet.js';
import { closeAll, createApp, fleetOptions } from './nest-helpers.js';

// Registration (forRoot, forRootAsync with a factory, a class or an existing provider, isGlobal),
// the forms a node can take, and the message of every configuration mistake.

let fleet: RedisFleet;
/** One master that requires a password, for URLs with credentials and a database number. */
let secured: RedisFleet;
const PASSWORD = 's3cret-pw';

beforeAll(async () => {
  [fleet, secured] = await Promise.all([RedisFleet.start(3), RedisFleet.start(1)]);
  // Set after start: the fleet's readiness probe speaks without a password.
  const admin = new Redis(secured.urls()[0]!, { maxRetriesPerRequest: 1 });
  try {
    await admin.config('SET', 'requirepass', PASSWORD);
  } finally {
    admin.disconnect();
  }
});
afterEach(async () => {
  vi.restoreAllMocks();
  await closeAll();
});
afterAll(async () => {
  await closeAll();
  await Promise.all([fleet?.stopAll(), secured?.stopAll()]);
});

/** A configuration source like @nestjs/config's ConfigService. */
@Injectable()
class ConfigService {
  static values: Record<string, string> = {};
  get(key: string): string | undefined {
    return ConfigService.values[key];
  }
}

@Module({ providers: [ConfigService], exports: [ConfigService] })
class ConfigModule {}

@Injectable()
class RedlockConfig implements RedlockOptionsFactory {
  constructor(private readonly config: ConfigService) {}
  createRedlockOptions(): RedlockModuleOptions {
    return { ...fleetOptions(fleet), nodes: this.config.get('NODES')!.split(',') };
  }
}

@Module({ imports: [ConfigModule], providers: [RedlockConfig], exports: [RedlockConfig] })
class RedlockConfigModule {}

/** A feature module that does not import RedlockModule: only a global registration reaches it. */
@Injectable()
class Feature {
  constructor(readonly redlock: RedlockService) {}
}
@Module({ providers: [Feature], exports: [Feature] })
class FeatureModule {}

async function roundTrip(redlock: RedlockService, resource: string) {
  return redlock.using(resource, 1_000, async (_signal, lock) => lock.resources);
}

describe('registration', () => {
  it('forRootAsync with a factory reading configuration', async () => {
    ConfigService.values = { NODES: fleet.urls().join(','), TTL: '1500' };
    const app = await createApp({
      imports: [
        RedlockModule.forRootAsync({
          imports: [ConfigModule],
          inject: [ConfigService],
          useFactory: (config: ConfigService) => ({
            ...fleetOptions(fleet),
            nodes: config.get('NODES')!.split(','),
            defaultTtlMs: Number(config.get('TTL')),
          }),
        }),
      ],
    });
    const redlock = app.get(RedlockService);
    expect(await roundTrip(redlock, 'async:factory')).toEqual(['async:factory']);
    const lock = await redlock.acquire('async:ttl');
    expect(lock.ttlMs).toBe(1_500);
    await lock.release();
  });

  it('forRootAsync with useClass and with useExisting', async () => {
    ConfigService.values = { NODES: fleet.urls().join(',') };
    const byClass = await createApp({
      imports: [RedlockModule.forRootAsync({ imports: [ConfigModule], useClass: RedlockConfig })],
    });
    expect(await roundTrip(byClass.get(RedlockService), 'async:class')).toEqual(['async:class']);
    const byExisting = await createApp({
      imports: [RedlockModule.forRootAsync({ imports: [RedlockConfigModule], useExisting: RedlockConfig })],
    });
    expect(await roundTrip(byExisting.get(RedlockService), 'async:existing')).toEqual(['async:existing']);
  });

  it('isGlobal makes RedlockService injectable in modules that do not import RedlockModule', async () => {
    const app = await createApp({ imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), isGlobal: true }), FeatureModule] });
    expect(await roundTrip(app.get(Feature).redlock, 'global')).toEqual(['global']);
    await expect(
      createApp({ imports: [RedlockModule.forRoot(fleetOptions(fleet)), FeatureModule] }),
    ).rejects.toThrow(/RedlockService/);
  });

  it('uses DEFAULT_TTL_MS when defaultTtlMs is not set', async () => {
    const app = await createApp({ imports: [RedlockModule.forRoot(fleetOptions(fleet))] });
    const lock = await app.get(RedlockService).acquire('default-ttl');
    expect(lock.ttlMs).toBe(DEFAULT_TTL_MS);
    await lock.release();
  });
});

describe('nodes', () => {
  it('connects with the password and database of a URL, and owns that connection', async () => {
    const port = secured.nodes[0]!.port;
    const app = await createApp({
      imports: [RedlockModule.forRoot({ ...fleetOptions(secured), nodes: [`redis://:${PASSWORD}@127.0.0.1:${port}/3`] })],
    });
    const redlock = app.get(RedlockService);
    const lock = await redlock.acquire('in-db-3', 5_000);
    const check = new Redis({ port, password: PASSWORD, db: 3, maxRetriesPerRequest: 1 });
    try {
      expect(await check.exists('redlock:in-db-3')).toBe(1);
      expect(await check.select(0).then(() => check.exists('redlock:in-db-3'))).toBe(0);
    } finally {
      check.disconnect();
      await lock.release();
    }
    const [client] = app.get(RedisConnections).owned as Redis[];
    expect(client!.options).toMatchObject({ db: 3, enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: false });
  });

  it('lets a node options object override the connection defaults', async () => {
    const { port } = fleet.nodes[0]!;
    const connections = await RedisConnections.open([{ host: '127.0.0.1', port, enableOfflineQueue: true, maxRetriesPerRequest: 3 }]);
    try {
      expect((connections.clients[0] as Redis).options).toMatchObject({ enableOfflineQueue: true, maxRetriesPerRequest: 3 });
    } finally {
      await connections.close();
    }
  });

  it('turns rediss:// into a TLS connection', async () => {
    vi.spyOn(Logger.prototype, 'warn').mockImplementation(() => {});
    // A closed port refuses at once; a TLS handshake with a plain redis-server would just hang.
    const connections = await RedisConnections.open([`rediss://127.0.0.1:${await freePort()}`]);
    try {
      expect((connections.clients[0] as Redis).options.tls).toBeTruthy();
    } finally {
      await connections.close();
    }
  });

  it('routes the engine warnings (an even number of masters) to a Nest logger', async () => {
    const warn = vi.spyOn(Logger.prototype, 'warn');
    await createApp({ imports: [RedlockModule.forRoot({ ...fleetOptions(fleet), nodes: fleet.urls().slice(0, 2) })] });
    expect(warn).toHaveBeenCalledWith(expect.stringMatching(/2 masters is an even count/));
  });
});

@Injectable()
class TooFarKey {
  @WithLock('x:{1}')
  async run(_only: string) {}
}

@Injectable()
class BrokenTemplate {
  @WithLock('x:{0')
  async run(_id: string) {}
}

@Injectable()
class BadTtl {
  @WithLock('x', { ttlMs: -1 })
  async run() {}
}

@Injectable()
class TextTtl {
  @WithLock('x', '5000' as never)
  async run() {}
}

@Injectable()
class TextAutoExtend {
  @WithLock('x', { autoExtend: 'no' as never })
  async run() {}
}

@Injectable()
class TextWaitTimeout {
  @WithLock('x', { waitTimeoutMs: '100' as never })
  async run() {}
}

@Injectable()
class NullOnLocked {
  @WithLock('x', { onLocked: null as never })
  async run() {}
}

@Injectable()
class NumericMode {
  @WithLock('x', { mode: 1 as never })
  async run() {}
}

@Controller('undecorated')
class UndecoratedParam {
  @Get(':id')
  @WithLock('x:{1}')
  get(@Param('id') _id: string, _notFromTheRequest?: string) {}
}

@Controller('helper')
class HelperOnController {
  @Get()
  get() {
    return this.helper();
  }

  @WithLock('helper')
  helper() {
    return 'unlocked';
  }
}

describe('configuration mistakes fail at bootstrap with a message naming the option', () => {
  const url = (i: number) => fleet.urls()[i]!;
  const port = (i: number) => fleet.nodes[i]!.port;

  it.each<[string, () => Partial<RedlockModuleOptions>, RegExp]>([
    ['no nodes', () => ({ nodes: undefined }), /^RedlockModule: options\.nodes must list at least one Redis master$/],
    ['an empty node list', () => ({ nodes: [] }), /^RedlockModule: options\.nodes must list at least one Redis master$/],
    ['a node of the wrong type', () => ({ nodes: [url(0), 42 as unknown as string] }), /options\.nodes\[1\] must be a redis:\/\/ or rediss:\/\/ URL/],
    ['a malformed URL', () => ({ nodes: [`redis://:${PASSWORD}@127.0.0.1:notaport`] }), /options\.nodes\[0\] is not a valid Redis URL/],
    ['a URL without a scheme', () => ({ nodes: [url(0), `admin:${PASSWORD}@127.0.0.1:7000`] }), /options\.nodes\[1\] is not a valid Redis URL: the scheme must be/],
    ['another scheme', () => ({ nodes: [`http://admin:${PASSWORD}@127.0.0.1:7000`] }), /options\.nodes\[0\] is not a valid Redis URL: the scheme must be/],
    ['a database that is not a number', () => ({ nodes: [`redis://admin:${PASSWORD}@127.0.0.1:7000/zero`] }), /options\.nodes\[0\] is not a valid Redis URL: the path must be a database number/],
    ['a node port that is not a number', () => ({ nodes: [url(0), { host: '127.0.0.1', port: 'abc' as unknown as number }] }), /^RedlockModule: options\.nodes\[1\]\.port must be an integer in \[1, 65535\] \(got a string\)$/],
    ['a node port out of range', () => ({ nodes: [{ port: 70_000 }] }), /options\.nodes\[0\]\.port must be an integer in \[1, 65535\]/],
    ['a node host that is not a string', () => ({ nodes: [{ host: 7 as unknown as string }] }), /options\.nodes\[0\]\.host must be a non-empty string \(got a number\)/],
    ['a logger without warn', () => ({ logger: {} as never }), /^RedlockModule: invalid options\.logger: object \(expected an object with a warn\(message\) method\)/],
    ['a drift factor given as text', () => ({ driftFactor: '0.1' as unknown as number }), /^RedlockModule: invalid options\.driftFactor: "0\.1"/],
    ['colliding key prefixes', () => ({ keyPrefix: '' }), /^RedlockModule: invalid options\.keyPrefix: "" \(keys could collide/],
    ['the same master twice', () => ({ nodes: [url(0), url(1), url(0)] }), /options\.nodes\[2\] and options\.nodes\[0\] are the same master \(127\.0\.0\.1:\d+\)/],
    ['a URL and options for one master', () => ({ nodes: [url(0), { host: '127.0.0.1', port: port(0) }] }), /options\.nodes\[1\] and options\.nodes\[0\] are the same master/],
    ['a zero default ttl', () => ({ defaultTtlMs: 0 }), /^RedlockModule: options\.defaultTtlMs must be a positive integer number of ms.*\(got 0\)$/],
    ['a negative default ttl', () => ({ defaultTtlMs: -5 }), /options\.defaultTtlMs must be a positive integer.*\(got -5\)/],
    ['a fractional default ttl', () => ({ defaultTtlMs: 1.5 }), /options\.defaultTtlMs must be a positive integer/],
    ['an unknown wait policy', () => ({ defaultWait: { onLocked: 'later' as 'wait' } }), /options\.defaultWait\.onLocked must be 'wait' or 'fail' \(got "later"\)/],
    ['a negative default wait', () => ({ defaultWait: { waitTimeoutMs: -1 } }), /options\.defaultWait\.waitTimeoutMs must be a finite number/],
    ['an errorMapper that is not a function', () => ({ errorMapper: 'map' as never }), /options\.errorMapper must be a function/],
    ['a bad engine option', () => ({ driftFactor: 0.7 }), /^RedlockModule: invalid options\.driftFactor: 0\.7/],
    ['fencing given as text', () => ({ fencing: 'false' as never }), /^RedlockModule: invalid options\.fencing: "false" \(expected true or false\)$/],
    ['a logger given as null', () => ({ logger: null as never }), /^RedlockModule: invalid options\.logger: null \(expected an object with a warn/],
    ['a retry count given as null', () => ({ retryCount: null as never }), /^RedlockModule: invalid options\.retryCount: null/],
    ['a default wait policy given as null', () => ({ defaultWait: { onLocked: null as never } }), /options\.defaultWait\.onLocked must be 'wait' or 'fail' \(got null\)/],
    ['a default wait longer than a timer can wait', () => ({ defaultWait: { waitTimeoutMs: 2 ** 31 } }), /options\.defaultWait\.waitTimeoutMs must be .*at most 2147483647 \(got 2147483648\)/],
  ])('%s', async (_name, override, message) => {
    const options = { ...fleetOptions(fleet), ...override() } as RedlockModuleOptions;
    for (const register of [
      () => RedlockModule.forRoot(options),
      () => RedlockModule.forRootAsync({ useFactory: async () => options }),
    ]) {
      const error = await createApp({ imports: [register()] }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RedlockConfigError);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).not.toContain(PASSWORD);
      expect((error as Error).message).not.toContain('admin');
    }
  });

  it.each<[string, object, RegExp]>([
    ['a template reading past the parameters', { providers: [TooFarKey] }, /^@WithLock on TooFarKey\.run: lock key template "x:\{1\}" reads argument 1 in \{1\}, but TooFarKey\.run declares 1 parameter$/],
    ['a template syntax error', { providers: [BrokenTemplate] }, /^@WithLock on BrokenTemplate\.run: lock key template "x:\{0" has an unclosed "\{"/],
    ['a bad ttl on the decorator', { providers: [BadTtl] }, /^@WithLock on BadTtl\.run: ttlMs must be a positive integer number of ms, at most 86400000 as maxTtlMs allows \(got -1\)$/],
    ['a ttl given as text', { providers: [TextTtl] }, /^@WithLock on TextTtl\.run: ttlMs must be a positive integer number of ms, at most 86400000 as maxTtlMs allows \(got "5000"\)$/],
    ['autoExtend given as text', { providers: [TextAutoExtend] }, /^@WithLock on TextAutoExtend\.run: autoExtend must be true or false \(got "no"\)$/],
    ['a wait given as text', { providers: [TextWaitTimeout] }, /^@WithLock on TextWaitTimeout\.run: waitTimeoutMs must be a finite number of ms >= 0.* \(got "100"\)$/],
    ['onLocked given as null', { providers: [NullOnLocked] }, /^@WithLock on NullOnLocked\.run: onLocked must be 'wait', 'fail' or 'skip' \(got null\)$/],
    ['a mode that is not one', { providers: [NumericMode] }, /^@WithLock on NumericMode\.run: invalid mode: 1 \(expected 'read' or 'write'\)$/],
    ['a route key reading an undecorated parameter', { controllers: [UndecoratedParam] }, /^@WithLock on UndecoratedParam\.get: the lock key reads argument 1, which has no parameter decorator/],
    ['a controller method that is not a handler', { controllers: [HelperOnController] }, /^@WithLock on HelperOnController\.helper: not a route or message handler/],
  ])('%s (and the connections opened are closed again)', async (_name, metadata, message) => {
    const close = vi.spyOn(RedisConnections.prototype, 'close');
    const error = await createApp({ imports: [RedlockModule.forRoot(fleetOptions(fleet))], ...metadata }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedlockConfigError);
    expect((error as Error).message).toMatch(message);
    expect(close).toHaveBeenCalledTimes(1);
  });
});
