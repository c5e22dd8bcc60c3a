/**
 * A safety worker's side of the IPC channel to the test process (see worker.ts): its config,
 * the history events it batches up, the requests it makes (the fenced store, lost replies), and
 * the test's stop and `go` messages.
 */
import type { StoreReply, StoreRequest } from './fenced-store.js';
import { now, type HistoryEvent } from './history.js';
import type { ChildMessage, LoseReplyRequest, ParentMessage, WorkerConfig, WorkerSummary } from './protocol.js';

export const config = JSON.parse(process.argv[2]!) as WorkerConfig;
export const { proc } = config;

export function send(message: ChildMessage): void {
  if (process.connected) process.send!(message);
}

const pending: HistoryEvent[] = [];
let flushQueued = false;

export function record(event: Omit<HistoryEvent, 'proc' | 't'> & { t?: bigint }): void {
  pending.push({ proc, t: event.t ?? now(), ...event });
  if (!flushQueued) {
    flushQueued = true;
    setImmediate(flush);
  }
}

export function flush(): void {
  flushQueued = false;
  if (pending.length > 0) send({ type: 'events', events: pending.splice(0) });
}

let requestIds = 0;
const replies = new Map<number, (body: StoreReply | null) => void>();

export function ask(kind: 'store', body: StoreRequest): Promise<StoreReply>;
export function ask(kind: 'lose-reply' | 'restore', body: LoseReplyRequest): Promise<null>;
export function ask(kind: 'store' | 'lose-reply' | 'restore', body: StoreRequest | LoseReplyRequest): Promise<StoreReply | null> {
  const id = ++requestIds;
  send({ type: 'request', id, kind, body } as ChildMessage);
  return new Promise((resolve) => replies.set(id, resolve));
}

/** Sends the last events and `message`, and leaves once they are out. */
function finish(message: ChildMessage): void {
  flush();
  if (!process.connected) return;
  process.send!(message, () => process.disconnect());
}

/**
 * Runs a worker's `main` and reports its end to the test process: its summary once it returns
 * (counted by then), or the error it failed with.
 */
export function runWorker(main: () => Promise<void>, summary: () => Omit<WorkerSummary, 'proc'>): void {
  main().then(
    () => finish({ type: 'done', summary: { proc, ...summary() } }),
    (error: unknown) => {
      process.exitCode = 1;
      finish({ type: 'fatal', error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    },
  );
}

export const stopping = new AbortController();
export const goListeners = new Set<(at: bigint, episode: number) => void>();

process.on('message', (message: ParentMessage) => {
  if (message.type === 'reply') {
    replies.get(message.id)?.(message.body);
    replies.delete(message.id);
  } else if (message.type === 'stop') {
    stopping.abort(new Error('stopped by the test'));
  } else if (message.type === 'go') {
    for (const listener of goListeners) listener(message.at, message.episode);
  }
});
// The test process went away: nothing left to report to.
process.on('disconnect', () => process.exit());
