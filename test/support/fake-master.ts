import { randomBytes } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';

/**
 * A misbehaving "Redis master" on a random 127.0.0.1 port: it speaks RESP well enough for
 * ioredis to connect and for the engine to identify it (INFO server gives a run_id and a long
 * uptime, so the restart quarantine admits it; HELLO, CLIENT, SELECT and PING get their usual answers),
 * then answers every other command with whatever `answer` returns, raw RESP. Fault injection for reply shapes a real server never sends: it
 * never stands in for a master that is meant to grant locks.
 */
export class FakeMaster {
  readonly #sockets = new Set<Socket>();
  /** Commands received, for tests that check what reached it. */
  readonly commands: string[][] = [];
  readonly #awaited: { name: string; resolve: (command: string[]) => void }[] = [];

  private constructor(
    private readonly server: Server,
    readonly port: number,
    /** Raw RESP for one command; several pieces are written one by one, a turn of the event loop apart (split frames). */
    public answer: (command: string[]) => string | string[],
  ) {
    server.on('connection', (socket) => this.#serve(socket));
  }

  static async start(answer: (command: string[]) => string | string[] = () => ':1\r\n'): Promise<FakeMaster> {
    const server = createServer();
    const port = await new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: '127.0.0.1', port: 0 }, () => resolve((server.address() as { port: number }).port));
    });
    return new FakeMaster(server, port, answer);
  }

  /** The next command called `name` (any case) to arrive, or the first one if it already has. */
  received(name: string): Promise<string[]> {
    const upper = name.toUpperCase();
    const arrived = this.commands.find(([first]) => first?.toUpperCase() === upper);
    if (arrived) return Promise.resolve(arrived);
    return new Promise((resolve) => this.#awaited.push({ name: upper, resolve }));
  }

  /** Connections open now (the server's ends). */
  get connections(): number {
    return this.#sockets.size;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  #serve(socket: Socket): void {
    this.#sockets.add(socket);
    socket.on('close', () => this.#sockets.delete(socket));
    socket.on('error', () => {});
    const runId = randomBytes(20).toString('hex');
    let buffer = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const parsed = parseCommand(buffer);
        if (!parsed) break;
        buffer = buffer.subarray(parsed.length);
        this.commands.push(parsed.command);
        const name = parsed.command[0]?.toUpperCase();
        for (const waiting of this.#awaited.filter((one) => one.name === name)) {
          this.#awaited.splice(this.#awaited.indexOf(waiting), 1);
          waiting.resolve(parsed.command);
        }
        if (name === 'HELLO') {
          // ioredis 6 asks for RESP3, as it does of a real Redis 7.
          socket.write('%3\r\n+server\r\n+redis\r\n+version\r\n+7.0.0\r\n+proto\r\n:3\r\n');
        } else if (name === 'CLIENT' || name === 'SELECT' || name === 'PING') {
          // Connection set-up goes through, so the client gets as far as sending lock commands.
          socket.write(name === 'PING' ? '+PONG\r\n' : '+OK\r\n');
        } else if (name === 'INFO') {
          socket.write(bulk(`# Server\r\nredis_version:7.0.0\r\nrun_id:${runId}\r\nuptime_in_seconds:864000\r\n# Persistence\r\nloading:0\r\n`));
        } else {
          writePieces(socket, this.answer(parsed.command));
        }
      }
    });
  }
}

function writePieces(socket: Socket, reply: string | string[]): void {
  if (typeof reply === 'string') {
    socket.write(reply);
    return;
  }
  const [first, ...rest] = reply;
  if (first !== undefined) socket.write(first);
  if (rest.length > 0) setImmediate(() => writePieces(socket, rest));
}

export function bulk(text: string): string {
  return `$${Buffer.byteLength(text)}\r\n${text}\r\n`;
}

/** One RESP array of bulk strings (how clients send commands), or undefined if incomplete. */
function parseCommand(buffer: Buffer): { command: string[]; length: number } | undefined {
  if (buffer.length === 0) return undefined;
  if (buffer[0] !== 0x2a /* '*' */) {
    // An inline command (redis-cli style): one line.
    const end = buffer.indexOf('\r\n');
    if (end < 0) return undefined;
    return { command: buffer.subarray(0, end).toString().split(' '), length: end + 2 };
  }
  let at = buffer.indexOf('\r\n');
  if (at < 0) return undefined;
  const count = Number(buffer.subarray(1, at).toString());
  at += 2;
  const command: string[] = [];
  for (let i = 0; i < count; i++) {
    const lineEnd = buffer.indexOf('\r\n', at);
    if (lineEnd < 0) return undefined;
    const size = Number(buffer.subarray(at + 1, lineEnd).toString());
    const start = lineEnd + 2;
    if (buffer.length < start + size + 2) return undefined;
    command.push(buffer.subarray(start, start + size).toString());
    at = start + size + 2;
  }
  return { command, length: at };
}

/**
 * A random reply of any RESP3 type (ioredis 6 speaks RESP3 with Redis 7): integers, simple and
 * bulk strings, nulls, errors, doubles, booleans, big numbers, verbatim strings, and nested
 * arrays, sets and maps.
 */
export function randomReply(random: () => number = Math.random, depth = 0): string {
  const one = <T>(options: readonly T[]): T => options[Math.floor(random() * options.length)]!;
  const nested = (count: number) => Array.from({ length: count }, () => randomReply(random, depth + 1)).join('');
  const kinds = [
    () => `:${one([0, 1, -1, -2, 2, 1000, -5, 2 ** 53, 2 ** 62])}\r\n`,
    () => `:${Math.floor(random() * 3)}\r\n`,
    () => one(['+OK\r\n', '+taken\r\n', '+1\r\n', '+\r\n']),
    () => bulk(one(['taken', '1', '0', '', 'OK', '\u00ff\u0000'])),
    () => one(['$-1\r\n', '*-1\r\n', '_\r\n']),
    () => one(['-ERR fake master says no\r\n', '!21\r\nSYNTAX invalid syntax\r\n']),
    () => one([',1.5\r\n', ',inf\r\n', ',nan\r\n', '#t\r\n', '#f\r\n', '(3492890328409238509324850943850943825024385\r\n']),
    () => '=8\r\ntxt:taken\r\n',
  ];
  const containers = [
    () => {
      const count = Math.floor(random() * 4);
      return `*${count}\r\n${nested(count)}`;
    },
    () => {
      const count = Math.floor(random() * 3);
      return `~${count}\r\n${nested(count)}`;
    },
    () => {
      const count = Math.floor(random() * 2);
      return `%${count}\r\n${nested(count * 2)}`;
    },
  ];
  return one(depth < 2 ? [...kinds, ...containers] : kinds)();
}
