import { pathToFileURL } from 'node:url';
import type { Redis } from 'ioredis';
import { Redlock, type Lock, type RedlockOptions } from '../../lib/index.js';
import { FakeMaster } from './fake-master.js';
import { connectMasters, disconnectAll, FRESH_FLEET, PATIENT, separateEngine } from './masters.js';
import type { RedlockClient } from '../../lib/core/voters/clients/clients.js';

/**
 * One caller waits for a lock that another engine holds, with a fake master among its masters:
 * so it subscribes on every master, the fake one included, which answers what it answers. The
 * holder releases once the fake has answered SUBSCRIBE. Resolves with how the wait ended, and
 * what closes both engines (their clients go into `opened`).
 */
export async function waitBesideFake(
  urls: readonly string[],
  fake: FakeMaster,
  opened: (Redis | RedlockClient)[],
  options: RedlockOptions,
): Promise<{ outcome: { lock: Lock } | { error: unknown }; close: () => void }> {
  const clients = await connectMasters([...urls, fake.url]);
  opened.push(...clients);
  const redlock = new Redlock(clients, { ...FRESH_FLEET, ...PATIENT, ...options });
  // The holder in an engine of its own: a waiter of the holder's engine would wait in its line, not on the masters.
  const { redlock: holding } = await separateEngine(urls, opened, { ...PATIENT, logger: { warn: () => {} } });
  const close = () => {
    redlock.close();
    holding.close();
  };
  try {
    const holder = await holding.acquire('beside-fake', 10_000);
    const waiting = redlock.acquire('beside-fake', 10_000).then(
      (lock) => ({ lock }),
      (error: unknown) => ({ error }),
    );
    await fake.received('SUBSCRIBE');
    await holder.release();
    const outcome = await waiting;
    if ('lock' in outcome) await outcome.lock.release();
    return { outcome, close };
  } catch (error) {
    close();
    throw error;
  }
}

// As a child program (node --import ./test/support/ts-loader/register.mjs): the fake answers
// `:1` to every command but the connection set-up. A crash of this process is the test's
// failure: it is how a defect in a Redis client shows itself. Prints one JSON line.
if (import.meta.url === pathToFileURL(process.argv[1]!).href) {
  const { urls, answer } = JSON.parse(process.argv[2]!) as { urls: string[]; answer: string };
  const fake = await FakeMaster.start(() => answer);
  const opened: Redis[] = [];
  let warned!: (message: string) => void;
  const warning = new Promise<string>((resolve) => (warned = resolve));
  const { outcome, close } = await waitBesideFake(urls, fake, opened, {
    logger: { warn: (message: string) => void (message.includes('wake-up') && warned(message)) },
  });
  const warningText = await warning;
  close();
  disconnectAll(opened);
  await fake.close();
  console.log(JSON.stringify({ acquired: 'lock' in outcome, error: 'error' in outcome ? String(outcome.error) : undefined, warning: warningText }));
}
