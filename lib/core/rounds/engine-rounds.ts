import type { RoundOperation } from '../lock/instrumentation.js';
import type { KeyNames } from './key-names.js';
import type { LockEngine } from '../lock/lock.js';
import type { RoundReply, RoundResult } from './quorum-round.js';
import type { RedisNode } from '../voters/redis-node.js';
import type { ResolvedRedlockOptions } from '../lock/redlock-options.js';
import type { LuaScript } from '../scripts/lua-script.js';
import { grantedIfOne } from '../scripts/replies.js';
import { replicaWait } from '../voters/replica-acks.js';

/** What each kind's rounds (ExclusiveKind, SharedKind) need of the engine: its rounds, votes and key names. */
export interface EngineRounds {
  readonly engine: LockEngine;
  /** The voters, in the order of every round's outcomes. */
  readonly nodes: readonly RedisNode[];
  readonly quorum: number;
  readonly options: ResolvedRedlockOptions;
  readonly names: KeyNames;
  round(
    ttlMs: number,
    interpret: (reply: unknown) => RoundReply,
    send: (node: RedisNode, index: number) => Promise<unknown>,
    operation: RoundOperation,
  ): Promise<RoundResult>;
  /** A request whose answer counts as a vote: masters in restart quarantine are not asked. */
  vote(request: (node: RedisNode) => Promise<unknown>): (node: RedisNode) => Promise<unknown>;
}

/** A kind's extension round: its script on every voting master (with replicaAcks, a WAIT), granted where it answers 1. */
export function extensionRound(
  rounds: EngineRounds,
  ttlMs: number,
  script: LuaScript,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<RoundResult> {
  const acks = replicaWait(rounds.options, ttlMs);
  return rounds.round(ttlMs, grantedIfOne, rounds.vote((node) => node.write(script, keys, args, acks)), 'extend');
}
