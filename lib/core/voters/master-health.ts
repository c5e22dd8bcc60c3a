import { monotonicNow } from '../base/clock.js';
import { quorumResumesInMs } from '../base/node-outcome.js';
import { errorText, NodeQuarantinedError, type RedisNode } from './redis-node.js';
import { NodeDuplicateError, type VoterAdmission } from './voter-admission.js';
import { within } from '../base/within.js';

/** What one master looks like to a health check: never credentials, never a lock key written. */
export interface MasterHealth {
  /** `host:port`, as in errors. */
  readonly node: string;
  /** It answered PING within the timeout. */
  readonly reachable: boolean;
  /** PING round trip, in ms, when it answered. */
  readonly roundTripMs?: number;
  /** Its vote would count in a round now. */
  readonly votes: boolean;
  /** How much longer its votes do not count: it restarted within the quarantine window. */
  readonly quarantinedForMs?: number;
  /**
   * A Redis Cluster voter with a shard in restart quarantine (restarted, or a replica promoted):
   * it votes, but not for resources in that shard's slots, for this many ms more at the longest.
   */
  readonly shardsQuarantinedForMs?: number;
  /** The master listed earlier that this one repeats (same run_id): its votes never count. */
  readonly sameServerAs?: string;
  /** Why it did not answer, free of credentials. */
  readonly error?: string;
}

/** What `checkMasters()` reports: whether a lock could be granted now, and each master's state. */
export interface MastersHealth {
  /** Masters a lock needs: a majority of them. */
  readonly quorum: number;
  /** Masters whose votes would count now. */
  readonly voting: number;
  /** A lock could be granted now, if no one else held it. */
  readonly available: boolean;
  /**
   * 0 when available; otherwise, when masters in restart quarantine are what is missing, in how
   * many ms enough of them vote again; undefined when masters are down or duplicated.
   */
  readonly availableInMs: number | undefined;
  /** Each master, in the order they were given. */
  readonly masters: readonly MasterHealth[];
}

/** Every master probed at once, and whether their votes would make a quorum now. */
export async function checkMasters(
  nodes: readonly RedisNode[],
  admission: VoterAdmission,
  quorum: number,
  timeoutMs: number,
): Promise<MastersHealth> {
  const masters = await Promise.all(nodes.map((node) => probeMaster(node, admission, timeoutMs)));
  const voting = masters.filter((master) => master.votes).length;
  const quarantined = masters.flatMap((master) => (master.quarantinedForMs === undefined ? [] : [master.quarantinedForMs]));
  const availableInMs = quorumResumesInMs(voting, quarantined, quorum);
  return { quorum, voting, available: voting >= quorum, availableInMs, masters };
}

/** PINGs a master and asks the engine's admission whether its vote would count now. */
async function probeMaster(node: RedisNode, admission: VoterAdmission, timeoutMs: number): Promise<MasterHealth> {
  const start = monotonicNow();
  try {
    await within(node.client.ping(), timeoutMs, () => {
      throw new Error(`no reply to PING within ${timeoutMs} ms`);
    });
  } catch (error) {
    return { node: node.name, reachable: false, votes: false, error: errorText(error) };
  }
  const roundTripMs = Math.round((monotonicNow() - start) * 100) / 100;
  try {
    await admission.admit(node);
    const shardsQuarantinedForMs = node.shardsQuarantinedForMs();
    return { node: node.name, reachable: true, roundTripMs, votes: true, ...(shardsQuarantinedForMs === undefined ? {} : { shardsQuarantinedForMs }) };
  } catch (error) {
    const seen = { node: node.name, reachable: true, roundTripMs, votes: false, error: errorText(error) };
    if (error instanceof NodeQuarantinedError) return { ...seen, quarantinedForMs: Math.ceil(error.remainingMs) };
    if (error instanceof NodeDuplicateError) return { ...seen, sameServerAs: error.sameAs };
    return seen;
  }
}

/**
 * One line on whether locks can be granted and, if not, why and until when: the health
 * indicator's message, and what the Nest module logs at bootstrap.
 */
export function describeMasters({ quorum, voting, masters, availableInMs }: MastersHealth): string {
  let text = `${voting} of ${masters.length} masters can vote, a lock needs ${quorum}`;
  const unreachable = masters.filter((master) => !master.reachable).length;
  if (unreachable) text += `; ${unreachable} unreachable`;
  const duplicates = masters.filter((master) => master.sameServerAs !== undefined).length;
  if (duplicates) text += `; ${duplicates} listed twice (the same server or Redis Cluster as another)`;
  const quarantined = masters.filter((master) => master.quarantinedForMs !== undefined);
  if (quarantined.length) {
    const longest = Math.max(...quarantined.map((master) => master.quarantinedForMs!));
    text += `; ${quarantined.length} in restart quarantine (recently restarted), the last for ${longest} ms more`;
  }
  const partly = masters.filter((master) => master.shardsQuarantinedForMs !== undefined);
  if (partly.length) {
    const longest = Math.max(...partly.map((master) => master.shardsQuarantinedForMs!));
    text += `; ${partly.length} cluster voter(s) with a shard in restart quarantine (resources in its slots wait up to ${longest} ms more)`;
  }
  if (availableInMs) text += `; locking resumes in ${availableInMs} ms`;
  return text;
}
