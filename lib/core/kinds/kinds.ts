import type { LockKind } from '../lock/lock-kind.js';
import { ExclusiveKind } from './exclusive/exclusive-kind.js';
import type { HoldKind, HoldKinds, KindParts } from './hold-kind.js';
import { PermitKind } from './permit/permit-kind.js';
import { ReadKind } from './read/read-kind.js';

/** Every lock kind, by the `type` a caller's options parse into (lock/lock-kind.ts): one line each. */
const KINDS: Record<LockKind['type'], (parts: KindParts, kind: LockKind) => HoldKind> = {
  write: (parts) => new ExclusiveKind(parts),
  read: (parts, kind) => new ReadKind(parts, kind),
  permit: (parts, kind) => new PermitKind(parts, kind),
};

/** One engine's kinds over Redis masters. */
export function redisKinds(parts: KindParts): Kinds {
  return new Kinds((kind) => KINDS[kind.type](parts, kind));
}

/** One engine's kinds, each made at its first use (a semaphore's kind per limit and weight). */
export class Kinds<K extends HoldKind = HoldKind> implements HoldKinds {
  readonly #made = new Map<string, K>();

  constructor(private readonly make: (kind: LockKind) => K) {}

  of(kind: LockKind): K {
    const name = kind.permits > 1 ? `${kind.name} x${kind.permits}` : kind.name;
    let made = this.#made.get(name);
    if (!made) {
      made = this.make(kind);
      this.#made.set(name, made);
    }
    return made;
  }
}
