import { Kinds } from '../../core/kinds/kinds.js';
import type { LockKind } from '../../core/lock/lock-kind.js';
import { MemoryExclusiveKind } from './exclusive-memory-kind.js';
import type { MemoryHoldKind, MemoryKindParts } from './memory-kind.js';
import { MemorySharedKind } from './shared-memory-kind.js';

/** Every lock kind over the stand-in master, by the `type` a caller's options parse into, as kinds/kinds.ts for Redis: one line each. */
const MEMORY_KINDS: Record<LockKind['type'], (parts: MemoryKindParts, kind: LockKind) => MemoryHoldKind> = {
  write: (parts) => new MemoryExclusiveKind(parts),
  read: (parts, kind) => new MemorySharedKind(parts, kind, 0),
  permit: (parts, kind) => new MemorySharedKind(parts, kind, kind.limit),
};

/** One in-memory engine's kinds. */
export function memoryKinds(parts: MemoryKindParts): Kinds<MemoryHoldKind> {
  return new Kinds((kind) => MEMORY_KINDS[kind.type](parts, kind));
}
