/**
 * The replies a RESP2 connection in subscriber mode may receive, read strictly: anything a real
 * Redis would not send there is a ProtocolViolation, which ends the connection. What a master
 * sends can then never reach code that assumes a shape (ioredis's does; see wake-subscriber.ts).
 */

/** One frame of a subscribed connection: `+OK` (to AUTH), an error reply, or an array of three. */
export type PubSubReply =
  | { readonly kind: 'status'; readonly text: string }
  | { readonly kind: 'error' }
  | { readonly kind: 'message'; readonly channel: string; readonly message: string }
  | { readonly kind: 'subscribe' | 'unsubscribe'; readonly channel: string; readonly count: number };

/** What the master sent is not a reply a subscribed connection can get; says what it was, never its text. */
export class ProtocolViolation extends Error {}

/** Longest status or error line read: Redis's are a few dozen bytes. */
const MAX_LINE = 4_096;
const CRLF = Buffer.from('\r\n');

/**
 * Reads frames from the bytes of one connection as they come, in pieces of any size. A length
 * beyond `maxBulk()` is refused when its header arrives, so nothing waits for (or buffers) a
 * frame a master only claims to be sending.
 */
export class PubSubReader {
  #buffer: Buffer = Buffer.alloc(0);

  constructor(private readonly maxBulk: () => number) {}

  /** The complete frames in what has arrived so far; the rest waits for more bytes. Throws ProtocolViolation. */
  push(chunk: Buffer): PubSubReply[] {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    const replies: PubSubReply[] = [];
    for (;;) {
      const cursor = { at: 0 };
      const reply = this.#frame(cursor);
      if (!reply) return replies;
      replies.push(reply);
      this.#buffer = this.#buffer.subarray(cursor.at);
    }
  }

  #frame(cursor: { at: number }): PubSubReply | undefined {
    const line = this.#line(cursor);
    if (line === undefined) return undefined;
    switch (line[0]) {
      case '+':
        return { kind: 'status', text: line.slice(1) };
      case '-':
        return { kind: 'error' };
      case '*': {
        if (line !== '*3') throw new ProtocolViolation(`${describe(line)} where only arrays of 3 come`);
        const kind = this.#bulk(cursor);
        if (kind === undefined) return undefined;
        if (kind !== 'message' && kind !== 'subscribe' && kind !== 'unsubscribe') {
          throw new ProtocolViolation('an array that is no message nor (un)subscribe confirmation');
        }
        const channel = this.#bulk(cursor);
        if (channel === undefined) return undefined;
        if (kind === 'message') {
          const message = this.#bulk(cursor);
          return message === undefined ? undefined : { kind, channel, message };
        }
        const count = this.#line(cursor);
        if (count === undefined) return undefined;
        if (!/^:\d{1,15}$/.test(count)) throw new ProtocolViolation(`${describe(count)} where a subscription count comes`);
        return { kind, channel, count: Number(count.slice(1)) };
      }
      default:
        throw new ProtocolViolation(`${describe(line)} where a status, an error or an array of 3 comes`);
    }
  }

  /** One bulk string, or undefined if it has not all arrived. */
  #bulk(cursor: { at: number }): string | undefined {
    const header = this.#line(cursor);
    if (header === undefined) return undefined;
    if (!/^\$\d{1,15}$/.test(header)) throw new ProtocolViolation(`${describe(header)} where a bulk string comes`);
    const length = Number(header.slice(1));
    if (length > this.maxBulk()) throw new ProtocolViolation(`a bulk string of ${length} bytes, more than any channel or message of ours`);
    const end = cursor.at + length;
    if (this.#buffer.length < end + 2) return undefined;
    if (this.#buffer[end] !== 0x0d || this.#buffer[end + 1] !== 0x0a) throw new ProtocolViolation('a bulk string longer than its length says');
    const text = this.#buffer.toString('utf8', cursor.at, end);
    cursor.at = end + 2;
    return text;
  }

  /** One CRLF-terminated line without its CRLF, or undefined if it has not all arrived. */
  #line(cursor: { at: number }): string | undefined {
    const end = this.#buffer.indexOf(CRLF, cursor.at);
    if (end < 0) {
      if (this.#buffer.length - cursor.at > MAX_LINE) throw new ProtocolViolation(`a line of more than ${MAX_LINE} bytes`);
      return undefined;
    }
    if (end - cursor.at > MAX_LINE) throw new ProtocolViolation(`a line of more than ${MAX_LINE} bytes`);
    const line = this.#buffer.toString('utf8', cursor.at, end);
    cursor.at = end + 2;
    return line;
  }
}

/** A command as RESP2 sends it: an array of bulk strings. */
export function command(args: readonly string[]): Buffer {
  const parts = [`*${args.length}\r\n`];
  for (const arg of args) parts.push(`$${Buffer.byteLength(arg)}\r\n${arg}\r\n`);
  return Buffer.from(parts.join(''));
}

const TYPES: Record<string, string> = {
  '+': 'a status',
  '-': 'an error',
  ':': 'an integer',
  $: 'a bulk string',
  '*': 'an array',
  _: 'a RESP3 null',
  ',': 'a RESP3 double',
  '#': 'a RESP3 boolean',
  '(': 'a RESP3 big number',
  '!': 'a RESP3 bulk error',
  '=': 'a RESP3 verbatim string',
  '%': 'a RESP3 map',
  '~': 'a RESP3 set',
  '>': 'a RESP3 push',
  '|': 'a RESP3 attribute',
};

/**
 * A header line as an error message may name it: its type, and its length if it is a number.
 * Never its text: a master could echo anything, a password it was sent included.
 */
function describe(line: string): string {
  const type = TYPES[line[0] ?? ''];
  if (!type) return 'bytes that are no RESP frame';
  const size = /^[*$]-?\d{1,15}$/.test(line) ? Number(line.slice(1)) : undefined;
  if (size === undefined) return type;
  return size < 0 ? `${type} of length ${size} (null)` : `${type} of length ${size}`;
}
