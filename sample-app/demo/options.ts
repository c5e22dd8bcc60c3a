/** What the demo does, from its command line and environment. */
export interface DemoOptions {
  short: boolean;
  /** Keep the replicas' and servers' logs even when the demo passes. */
  keepLogs: boolean;
  replicas: number;
  /** Masters the demo starts itself (ignored with REDIS_URLS). */
  masters: number;
  withdrawals: { accounts: number; perAccount: number; opening: number; amount: number };
  transfers: { accounts: number; count: number; opening: number };
  faults: { accounts: number; perAccount: number; opening: number; amount: number };
  /** Passed to every replica. */
  app: { walletWorkMs: number; reconcileEveryMs: number; reconcileWorkMs: number };
  /** REDIS_URLS / STORE_URL: servers that are not the demo's own. */
  external: { masters: string[] | undefined; store: string | undefined };
}

export const USAGE = `usage: npm run demo [-- --short]

Starts 5 redis-server lock masters, a redis-server store and 3 replicas of the sample app,
drives concurrent traffic at them and reports what the locks change.

  --short     fewer requests, for CI (well under a minute)
  --keep-logs keep the replicas' logs (they are kept anyway when the demo fails)
  REDIS_URLS  comma-separated lock masters to use instead of starting them (no fault phase then)
  STORE_URL   the wallet store to use instead of starting one (the demo's keys get a unique prefix)
  REDIS_SERVER_BIN  the redis-server binary, when it is not on PATH`;

export function parseOptions(argv: readonly string[], env: NodeJS.ProcessEnv): DemoOptions | 'help' {
  for (const arg of argv) {
    if (arg === '--help' || arg === '-h') return 'help';
    if (arg !== '--short' && arg !== '--keep-logs') throw new Error(`unknown argument ${arg}\n\n${USAGE}`);
  }
  const short = argv.includes('--short');
  const list = (text: string | undefined) => text?.split(',').map((url) => url.trim()).filter(Boolean);
  const masters = list(env.REDIS_URLS);
  return {
    short,
    keepLogs: argv.includes('--keep-logs'),
    replicas: 3,
    masters: 5,
    withdrawals: short
      ? { accounts: 3, perAccount: 10, opening: 50, amount: 10 }
      : { accounts: 5, perAccount: 20, opening: 100, amount: 10 },
    transfers: short ? { accounts: 4, count: 16, opening: 100 } : { accounts: 6, count: 40, opening: 100 },
    faults: short
      ? { accounts: 2, perAccount: 6, opening: 30, amount: 10 }
      : { accounts: 3, perAccount: 10, opening: 50, amount: 10 },
    app: { walletWorkMs: 50, reconcileEveryMs: short ? 500 : 1_000, reconcileWorkMs: short ? 150 : 300 },
    external: { masters: masters?.length ? masters : undefined, store: list(env.STORE_URL)?.[0] },
  };
}
