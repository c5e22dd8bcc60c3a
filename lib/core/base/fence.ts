/**
 * The next fencing token after the highest counter a quorum reported. The wall-clock floor
 * (microsecond-scaled milliseconds) keeps tokens rising even when the counters of the one master
 * two successive majorities shared were lost in a restart, provided the clients' clocks agree to
 * within the time between those two holders. Below 2^53 until the 23rd century.
 */
export function nextFence(highestSeen: number, timeFloor: boolean): number {
  const next = highestSeen + 1;
  return timeFloor ? Math.max(next, Date.now() * 1000) : next;
}
