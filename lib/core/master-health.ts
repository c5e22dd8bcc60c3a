import { monotonicNow } from './clock.js';
import { errorText, NodeDuplicateError, NodeQuarantinedError, type RedisNode } from './redis-node.js';
import type { VoterAdmission } from './voter-admission.js';

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
  /** The master listed earlier that this one repeats (same run_id): its votes never count. */
  readonly sameServerAs?: string;
  readonly error?: string;
}

export interface MastersHealth {
  readonly quorum: number;
  /** Masters whose votes would count now. */
  readonly voting: number;
  /** A lock could be granted now, if no one else held it. */
  readonly available: boolean;
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
  return { quorum, voting, available: voting >= quorum, masters };
}

/** PINGs a master and asks the engine's admission whether its vote would count now. */
async function probeMaster(node: RedisNode, admission: VoterAdmission, timeoutMs: number): Promise<MasterHealth> {
  const start = monotonicNow();
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no reply to PING within ${timeoutMs} ms`)), timeoutMs);
    });
    await Promise.race([node.client.ping(), timeout]);
  } catch (error) {
    return { node: node.name, reachable: false, votes: false, error: errorText(error) };
  } finally {
    clearTimeout(timer);
  }
  const roundTripMs = Math.round((monotonicNow() - start) * 100) / 100;
  try {
    await admission.admit(node);
    return { node: node.name, reachable: true, roundTripMs, votes: true };
  } catch (error) {
    const seen = { node: node.name, reachable: true, roundTripMs, votes: false, error: errorText(error) };
    if (error instanceof NodeQuarantinedError) return { ...seen, quarantinedForMs: Math.ceil(error.remainingMs) };
    if (error instanceof NodeDuplicateError) return { ...seen, sameServerAs: error.sameAs };
    return seen;
  }
}
