/**
 * The sample app's configuration, read from environment variables once at startup (loaded by
 * @nestjs/config's ConfigModule) and validated here, so a mistake stops the app with a message
 * that names the variable instead of failing later on the first request.
 */
export interface SampleConfig {
  http: { host: string; port: number; replicaId: string };
  redlock: {
    /** Independent Redis masters for the locks, never replicas of one another. */
    nodes: string[];
    ttlMs: number;
    /** Undefined: the engine's default (on). False only for masters that were just started empty. */
    restartQuarantineMs: number | false | undefined;
    /** Undefined: the engine's default (a tenth of the ttl, at most 100 ms). */
    nodeTimeoutMs: number | undefined;
  };
  /** The shared wallet store: its own Redis, not one of the lock masters. */
  store: { url: string; keyPrefix: string };
  wallet: { workMs: number };
  reconcile: { everyMs: number; workMs: number };
}

const HINT = 'npm run demo starts masters, a store and replicas for you';

export function configuration(env: NodeJS.ProcessEnv = process.env): SampleConfig {
  return {
    http: {
      // Loopback by default: a sample should not listen on every interface unless asked to.
      host: env.HOST || '127.0.0.1',
      port: integer(env, 'PORT', 3000, 0),
      replicaId: env.REPLICA_ID || `replica-${process.pid}`,
    },
    redlock: {
      nodes: urls(env, 'REDIS_URLS'),
      ttlMs: integer(env, 'LOCK_TTL_MS', 5_000, 1),
      restartQuarantineMs: quarantine(env.REDLOCK_RESTART_QUARANTINE),
      nodeTimeoutMs: env.LOCK_NODE_TIMEOUT_MS ? integer(env, 'LOCK_NODE_TIMEOUT_MS', 0, 1) : undefined,
    },
    store: { url: urls(env, 'STORE_URL')[0]!, keyPrefix: env.STORE_KEY_PREFIX || 'wallet:' },
    // Time a withdrawal or transfer spends between reading and writing a balance, standing in for
    // the call to a payment provider: the window in which unlocked requests race.
    wallet: { workMs: integer(env, 'WALLET_WORK_MS', 50, 0) },
    reconcile: {
      everyMs: reconcileEveryMs(env),
      workMs: integer(env, 'RECONCILE_WORK_MS', 300, 0),
    },
  };
}

/**
 * RECONCILE_EVERY_MS on its own: the job's `@Interval` reads it when its class is defined, before
 * the ConfigModule exists (decorator arguments are fixed then).
 */
export function reconcileEveryMs(env: NodeJS.ProcessEnv = process.env): number {
  return integer(env, 'RECONCILE_EVERY_MS', 2_000, 50);
}

function urls(env: NodeJS.ProcessEnv, name: string): string[] {
  const list = (env[name] ?? '').split(',').map((url) => url.trim()).filter(Boolean);
  if (list.length === 0) throw new Error(`${name} is required (comma-separated redis:// URLs); ${HINT}`);
  return list;
}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number): number {
  const text = env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer >= ${min} (got ${text})`);
  return value;
}

/** REDLOCK_RESTART_QUARANTINE: unset = engine default, "off" = disabled, or a window in ms. */
function quarantine(text: string | undefined): number | false | undefined {
  if (text === undefined || text === '') return undefined;
  if (text === 'off') return false;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0) {
    throw new Error(`REDLOCK_RESTART_QUARANTINE must be "off" or a number of ms (got ${text})`);
  }
  return value;
}
