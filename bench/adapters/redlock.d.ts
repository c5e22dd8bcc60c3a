// redlock 5.0.0-beta.2 ships dist/index.d.ts, but its package.json "exports" has no "types"
// entry, so TypeScript under nodenext cannot find it. Declares the part the bench uses.
declare module 'redlock' {
  import type { EventEmitter } from 'node:events';
  import type { Redis } from 'ioredis';

  export interface Settings {
    readonly driftFactor?: number;
    readonly retryCount?: number;
    readonly retryDelay?: number;
    readonly retryJitter?: number;
    readonly automaticExtensionThreshold?: number;
  }

  export interface Lock {
    readonly resources: string[];
    readonly value: string;
    release(): Promise<unknown>;
  }

  export default class Redlock extends EventEmitter {
    constructor(clients: Iterable<Redis>, settings?: Partial<Settings>);
    acquire(resources: string[], duration: number, settings?: Partial<Settings>): Promise<Lock>;
  }
}
