import { describe, expect, it } from 'vitest';
import { cancelDeadline, setDeadline } from '../../lib/core/rounds/round-deadlines.js';

/** Resolves with the order in which the named deadlines fired, once `last` has. */
function firing(): { fired: string[]; fire: (name: string) => () => void; after: (name: string) => Promise<string[]> } {
  const fired: string[] = [];
  const waiting = new Map<string, () => void>();
  return {
    fired,
    fire: (name) => () => {
      fired.push(name);
      waiting.get(name)?.();
    },
    after: (name) => new Promise((resolve) => waiting.set(name, () => resolve(fired))),
  };
}

describe('round deadlines (one timer per timeout length)', () => {
  it('fires every deadline still set, in the order they fall due, and none that was cancelled', async () => {
    const { fire, after } = firing();
    const a = setDeadline(15, fire('a'));
    const b = setDeadline(15, fire('b'));
    const c = setDeadline(15, fire('c'));
    setDeadline(15, fire('d'));
    const e = setDeadline(15, fire('e'));
    const last = setDeadline(30, fire('last'));
    // Cancelled at the head, in the middle and at the tail of the 15 ms list.
    cancelDeadline(a);
    cancelDeadline(c);
    cancelDeadline(e);
    expect(await after('last')).toEqual(['b', 'd', 'last']);
    cancelDeadline(b); // after it fired: nothing happens
    cancelDeadline(last);
  });

  it('a length whose deadlines were all cancelled still serves the next one', async () => {
    const { fire, after } = firing();
    for (let i = 0; i < 100; i++) cancelDeadline(setDeadline(7, fire(`gone ${i}`)));
    const fired = after('next');
    setDeadline(7, fire('next'));
    expect(await fired).toEqual(['next']);
    // And once the timer has found its list empty and dropped it, a new list serves the next.
    const again = after('again');
    setDeadline(7, fire('again'));
    expect(await again).toEqual(['next', 'again']);
  });

  it('a deadline set while another fires falls due on its own time', async () => {
    const { fire, after } = firing();
    const inner = after('inner');
    setDeadline(5, () => {
      fire('outer')();
      setDeadline(5, fire('inner'));
    });
    expect(await inner).toEqual(['outer', 'inner']);
  });

  it('a deadline that cancels another of its length while the timer fires them leaves the rest in order', async () => {
    const { fired, fire, after } = firing();
    const deadlines: ReturnType<typeof setDeadline>[] = [];
    for (let i = 0; i < 100; i++) {
      // The 71st, fired with 70 behind it, cancels the last: the list is cut while it is being read.
      deadlines.push(setDeadline(10, i === 70 ? () => (fire('70')(), cancelDeadline(deadlines[99]!)) : fire(String(i))));
    }
    await after('98');
    expect(fired).toEqual(Array.from({ length: 99 }, (_, i) => String(i)));
    // The cancelled one never fires, and the list still serves the next deadline of its length.
    const next = after('next');
    setDeadline(10, fire('next'));
    expect(await next).toEqual([...Array.from({ length: 99 }, (_, i) => String(i)), 'next']);
  });
});
