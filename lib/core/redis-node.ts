import type { Redis } from 'ioredis';
import type { LuaScript } from './lua-scripts.js';
import { redactCredentials } from './redact.js';

/**
 * One independent Redis master. Runs the lock scripts by EVALSHA and falls back to EVAL when
 * the server has lost its script cache (restart, SCRIPT FLUSH), without registering commands
 * on a client the caller may share with other code.
 */
export class RedisNode {
  /** `host:port` (or the socket path): safe to log, never carries credentials. */
  readonly name: string;

  constructor(readonly client: Redis) {
    this.name = nodeName(client);
  }

  async run(script: LuaScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    try {
      return await this.client.evalsha(script.sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      return this.client.eval(script.source, keys.length, ...keys, ...args);
    }
  }
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

interface AddressOptions {
  host?: string;
  port?: number;
  path?: string;
  sentinels?: unknown[] | null;
  name?: string | null;
}

export function nodeName(client: Redis): string {
  const options = (client as unknown as { options?: AddressOptions }).options ?? {};
  if (options.sentinels && options.sentinels.length > 0) return `sentinel:${options.name ?? 'master'}`;
  if (options.path) return options.path;
  const host = options.host ?? 'localhost';
  return `${host.includes(':') ? `[${host}]` : host}:${options.port ?? 6379}`;
}

export function errorText(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return redactCredentials(text);
}
