import { WHILE_LEADER } from './redlock.constants.js';

/**
 * Runs the provider method on one replica at a time: the leader of `election`. Each replica
 * campaigns once the application has bootstrapped; the one elected calls the method with an
 * `AbortSignal` and the `Leadership` (its `term` a fencing token). The signal aborts when the
 * leadership ends (lost, or the application shuts down): stop the work then. When the method
 * returns, the replica stays leader (a duty it set up keeps running); when it throws, the
 * replica resigns, waits one lease and campaigns again. After a leadership ends and the method
 * has settled, the replica campaigns again, and runs the method again when elected.
 *
 * The decorator only records metadata; `LeadershipService` finds the methods at bootstrap.
 * Provider methods only (not handlers), on singleton providers.
 *
 * @param election - the election's name: the replicas that campaign for the same name elect one leader.
 */
export function WhileLeader(election: string): MethodDecorator {
  return (_target, _propertyKey, descriptor) => {
    Reflect.defineMetadata(WHILE_LEADER, election, descriptor.value as object);
    return descriptor;
  };
}
