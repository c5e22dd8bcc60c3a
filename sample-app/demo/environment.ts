import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DemoOptions } from './options.js';
import { RedisServer } from './redis-server.js';
import { Replica } from './replica.js';

/** The compiled sample app, next to this compiled demo. */
const MAIN_FILE = fileURLToPath(new URL('../src/main.js', import.meta.url));

/**
 * Everything the demo runs: lock masters and a store (its own redis-servers unless REDIS_URLS /
 * STORE_URL name others), and the replicas. Built up step by step so that stopAll(), called
 * on success, error or Ctrl-C, stops exactly what was started so far.
 */
export class DemoEnvironment {
  readonly dir = mkdtempSync(join(tmpdir(), 'nestjs-redlock-demo-'));
  readonly masters: RedisServer[] = [];
  store: RedisServer | undefined;
  readonly replicas: Replica[] = [];
  #stopping: Promise<void> | undefined;

  constructor(private readonly options: DemoOptions) {}

  /** True when the masters are the demo's own, so it may stop and restart them. */
  get ownsMasters(): boolean {
    return this.options.external.masters === undefined;
  }

  get masterUrls(): string[] {
    return this.options.external.masters ?? this.masters.map((master) => master.url);
  }

  get replicaUrls(): string[] {
    return this.replicas.map((replica) => replica.url);
  }

  async start(): Promise<void> {
    const { external } = this.options;
    const servers: Promise<void>[] = [];
    if (!external.masters) {
      for (let i = 0; i < this.options.masters; i++) {
        servers.push(RedisServer.start(`master ${i + 1}`, join(this.dir, `master-${i + 1}`)).then((s) => void (this.masters[i] = s)));
      }
    }
    if (!external.store) {
      servers.push(RedisServer.start('store', join(this.dir, 'store')).then((s) => void (this.store = s)));
    }
    await settleAll(servers);
    const env: Record<string, string> = {
      REDIS_URLS: this.masterUrls.join(','),
      STORE_URL: external.store ?? this.store!.url,
      WALLET_WORK_MS: String(this.options.app.walletWorkMs),
      RECONCILE_EVERY_MS: String(this.options.app.reconcileEveryMs),
      RECONCILE_WORK_MS: String(this.options.app.reconcileWorkMs),
    };
    // A store that is not ours may hold other data, and earlier demo runs: keep to fresh keys.
    if (external.store) env.STORE_KEY_PREFIX = `wallet-demo-${Date.now()}:`;
    // The restart quarantine stays on, as shipped: our masters have just started, so the replicas'
    // first locks wait until the masters are older than the longest ttl (the app logs when), and
    // after the fault phase restarts masters empty, locking pauses again until they are.
    await settleAll(
      Array.from({ length: this.options.replicas }, async (_, i) => {
        const id = `r${i + 1}`;
        this.replicas[i] = await Replica.start({ mainFile: MAIN_FILE, id, env, logFile: join(this.dir, `${id}.log`) });
      }),
    );
  }

  /** Stops the replicas first (they release their locks), then the servers. Idempotent. */
  stopAll({ keepLogs = false } = {}): Promise<void> {
    this.#stopping ??= (async () => {
      await Promise.allSettled(this.replicas.filter(Boolean).map((replica) => replica.stop()));
      await Promise.allSettled([...this.masters, this.store].filter((s) => s !== undefined).map((server) => server.kill()));
      if (!keepLogs) rmSync(this.dir, { recursive: true, force: true });
    })();
    return this.#stopping;
  }
}

/** Like Promise.all, but waits for every task before throwing the first error: nothing is left starting. */
async function settleAll(tasks: Promise<void>[]): Promise<void> {
  const results = await Promise.allSettled(tasks);
  const failure = results.find((result) => result.status === 'rejected');
  if (failure) throw failure.reason;
}
