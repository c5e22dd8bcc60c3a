import { fork, type ChildProcess } from 'node:child_process';
import { registry } from './process-cleanup.js';

const LOADER = new URL('./ts-loader/register.mjs', import.meta.url).href;

/** A TypeScript app run as a process of its own (a replica), killed with the test run if it outlives it. */
export interface AppProcess {
  readonly child: ChildProcess;
  /** Resolves when the app sends 'ready'; rejects, with its output, if it exits first. */
  readonly ready: Promise<void>;
  readonly exited: Promise<void>;
}

/**
 * Forks `entry` (a .ts file, through the test loader) with `config` as its one argument, as JSON.
 * Every other message it sends goes to `onMessage`; `label` names it if it exits before 'ready'.
 */
export function forkApp<Message>(entry: string, config: unknown, label: string, onMessage: (message: Message) => void): AppProcess {
  const env = { ...process.env };
  delete env['NODE_OPTIONS'];
  const child = fork(entry, [JSON.stringify(config)], { execArgv: ['--import', LOADER], stdio: ['ignore', 'pipe', 'pipe', 'ipc'], env });
  registry.children.add(child);
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => registry.children.delete(child));
  const ready = new Promise<void>((resolve, reject) => {
    child.on('message', (message: Message | 'ready') => {
      if (message === 'ready') resolve();
      else onMessage(message);
    });
    void exited.then(() => reject(new Error(`${label} exited before it was ready:\n${output}`)));
  });
  return { child, ready, exited };
}
