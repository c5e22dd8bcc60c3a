// node-redlock's (v5) types, as its users name them.

import type { Cluster, Redis } from 'ioredis';

/** A master as node-redlock names it: the client it was given. */
export type Client = Redis | Cluster;

/** One master's vote in one round, as node-redlock reports it. */
export type ClientExecutionResult =
  | {
      /** The master's client. */
      client: Client;
      /** It did what was asked. */
      vote: 'for';
      /** How many resources it applied the operation to. */
      value: number;
    }
  | {
      /** The master's client. */
      client: Client;
      /** It refused or failed. */
      vote: 'against';
      /** Why: a ResourceLockedError when another owner holds a resource, else the master's error. */
      error: Error;
    };

/** One round's votes, as node-redlock reports them. */
export type ExecutionStats = {
  /** How many masters were asked. */
  readonly membershipSize: number;
  /** How many of them a quorum needs: floor(N / 2) + 1. */
  readonly quorumSize: number;
  /** The masters that did what was asked. */
  readonly votesFor: Set<Client>;
  /** The masters that refused (ResourceLockedError) or failed (their error), with why. */
  readonly votesAgainst: Map<Client, Error>;
};

/** The rounds of an operation that reached a quorum: one promise of its votes per round. */
export type ExecutionResult = {
  /** Per round, oldest first, its votes. */
  attempts: ReadonlyArray<Promise<ExecutionStats>>;
};
