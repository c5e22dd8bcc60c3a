import type { ChildProcess } from 'node:child_process';

/**
 * The next message from `child`; rejects if the child goes away first, so a crashed child fails
 * its measurement instead of hanging the run. 'close' (not 'exit') is the end: it comes only
 * after the IPC channel has delivered everything the child sent.
 */
export function nextMessage<T>(child: ChildProcess, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: unknown) => {
      child.off('close', onClose);
      resolve(message as T);
    };
    const onClose = (code: number | null, signal: NodeJS.Signals | null) => {
      child.off('message', onMessage);
      reject(new Error(`${what} exited with ${signal ?? code} before reporting`));
    };
    child.once('message', onMessage);
    child.once('close', onClose);
  });
}

/** For a forked child: report once, and never outlive the parent (an orphan would keep load on the masters). */
export function reportAndExit(message: unknown): void {
  process.send!(message, () => process.disconnect());
}

process.once('disconnect', () => process.exit());
