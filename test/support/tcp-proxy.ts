import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy placed between a client and one redis node to inject network faults
 * (latency, partitions, lost replies, resets) without touching the redis process.
 *
 * Terminology: a "chunk" is one TCP read on the proxy. For request/response redis
 * traffic with a single command in flight, one reply arrives as one read, so
 * "drop the next chunk" means "drop the next reply". With pipelining or large
 * replies a read can hold several replies or part of one; tests that rely on
 * dropNextReplies() must therefore keep one command in flight.
 */

/** Knobs shared by every connection of one proxy; read at the moment a chunk arrives. */
interface Faults {
  latencyMs: number;
  blackholed: boolean;
  dropReplies: number;
  /** Armed by loseNextReply(): the next request to pass through picks its connection. */
  loseNextReply: boolean;
  lostReplies: number;
}

/**
 * One direction of one connection. Chunks wait in a FIFO with their due time and a
 * single timer releases the head, so bytes can never overtake each other, even when
 * the latency is lowered while chunks are queued (independent setTimeouts would
 * reorder them in exactly that case).
 */
class Channel {
  private readonly queue: { chunk: Buffer; due: number }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private srcEnded = false;

  constructor(
    private readonly src: Socket,
    private readonly dst: Socket,
    private readonly faults: Faults,
    private readonly carriesReplies: boolean,
    private readonly lossy: LossyReply,
  ) {
    src.on('data', (chunk: Buffer) => this.receive(chunk));
    // A clean FIN is forwarded only after the bytes queued before it.
    src.on('end', () => {
      this.srcEnded = true;
      this.flush();
    });
  }

  private receive(chunk: Buffer): void {
    if (this.faults.blackholed) return; // swallowed, never delivered later
    if (!this.carriesReplies && this.faults.loseNextReply) {
      // This request's connection is the one whose next reply will be lost.
      this.faults.loseNextReply = false;
      this.lossy.armed = true;
    } else if (this.carriesReplies && this.lossy.armed) {
      // The server has executed the request; its reply is lost and the connection breaks at
      // once, before any later byte could be matched to the wrong command.
      this.lossy.armed = false;
      this.faults.lostReplies++;
      this.lossy.reset();
      return;
    }
    if (this.carriesReplies && this.faults.dropReplies > 0) {
      // The server has already executed the command; only its reply is lost.
      this.faults.dropReplies--;
      return;
    }
    this.queue.push({ chunk, due: performance.now() + this.faults.latencyMs });
    this.flush();
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      const wait = head.due - performance.now();
      if (wait > 0) {
        this.timer = setTimeout(() => this.flush(), Math.ceil(wait));
        return;
      }
      this.queue.shift();
      // Blackhole also covers bytes that were already queued when it was switched on.
      if (this.faults.blackholed || this.dst.destroyed || this.dst.writableEnded) continue;
      if (!this.dst.write(head.chunk)) {
        // Backpressure: stop reading until the slow side catches up.
        this.src.pause();
        this.dst.once('drain', () => this.src.resume());
      }
    }
    if (this.srcEnded && !this.dst.destroyed && !this.dst.writableEnded) this.dst.end();
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.queue.length = 0;
  }
}

/** Per connection: whether its next reply is to be lost (see TcpProxy.loseNextReply). */
interface LossyReply {
  armed: boolean;
  reset(): void;
}

/** A client socket, its upstream socket and the two directions between them. */
class Pair {
  private readonly channels: Channel[];

  constructor(
    readonly client: Socket,
    readonly server: Socket,
    faults: Faults,
    onLostReply: (pair: Pair) => void,
  ) {
    const lossy: LossyReply = { armed: false, reset: () => onLostReply(this) };
    this.channels = [
      new Channel(client, server, faults, false, lossy),
      new Channel(server, client, faults, true, lossy),
    ];
  }

  /** reset=true sends an RST to the client so it sees ECONNRESET rather than a clean close. */
  destroy(reset: boolean): void {
    for (const channel of this.channels) channel.dispose();
    if (!this.client.destroyed) {
      if (reset) this.client.resetAndDestroy();
      else this.client.destroy();
    }
    this.server.destroy();
  }
}

export class TcpProxy {
  private readonly pairs = new Set<Pair>();
  private readonly faults: Faults = { latencyMs: 0, blackholed: false, dropReplies: 0, loseNextReply: false, lostReplies: 0 };
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly target: { host: string; port: number },
  ) {
    server.on('connection', (client) => this.accept(client));
  }

  /** Listens on a random 127.0.0.1 port and forwards each connection to `target`. */
  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    // Guard the developer's shared Redis: a test must never be pointed at it, even by mistake.
    if (target.port === 6379) throw new Error('TcpProxy: refusing to proxy to port 6379');
    const server = createServer();
    const port = await new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: '127.0.0.1', port: 0 }, () => {
        const address = server.address();
        if (typeof address === 'object' && address !== null) resolve(address.port);
        else reject(new Error('TcpProxy: server has no TCP address'));
      });
    });
    return new TcpProxy(server, port, { ...target });
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Delays every chunk received from now on, in both directions, by `ms` (order kept). */
  setLatency(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`latency must be >= 0, got ${ms}`);
    this.faults.latencyMs = ms;
  }

  /**
   * When on, connections are still accepted and kept open but no byte is forwarded in
   * either direction: bytes are discarded, not queued, so switching it off later does
   * not replay them. FIN/RST still propagate, so a crashed node stays visible.
   */
  blackhole(on: boolean): void {
    this.faults.blackholed = on;
  }

  /**
   * Discards the next `n` server->client chunks (across all connections). Requests
   * still reach the server and are executed; the client just never hears back.
   * See the note at the top of this file about what a chunk is.
   */
  dropNextReplies(n: number): void {
    if (!Number.isInteger(n) || n < 0) throw new RangeError(`n must be a non-negative integer, got ${n}`);
    this.faults.dropReplies = n;
  }

  /**
   * The reply to the next request that passes through (on whichever connection sends it) is
   * lost after the server executed the request, and that connection is reset at that very
   * moment: a lost reply as a client really meets it. (A reply skipped on a live stream, as
   * dropNextReplies does, would make the client match every later reply to the wrong command.)
   * Call with false to disarm if no request came.
   */
  loseNextReply(on = true): void {
    this.faults.loseNextReply = on;
  }

  /** How many replies loseNextReply() has lost so far. */
  get lostReplies(): number {
    return this.faults.lostReplies;
  }

  /** Abruptly destroys every current connection; clients see ECONNRESET / close. New ones still work. */
  resetConnections(): void {
    for (const pair of [...this.pairs]) pair.destroy(true);
    this.pairs.clear();
  }

  /** Stops listening and destroys every tracked socket. Idempotent. */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const pair of [...this.pairs]) pair.destroy(false);
      this.pairs.clear();
    });
    return this.closing;
  }

  private accept(client: Socket): void {
    if (this.closing) {
      client.destroy();
      return;
    }
    const upstream = connect({ host: this.target.host, port: this.target.port });
    const pair = new Pair(client, upstream, this.faults, (lost) => {
      lost.destroy(true);
      this.pairs.delete(lost);
    });
    this.pairs.add(pair);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    // Any error (ECONNREFUSED from a downed node, a reset from either side) tears
    // down both halves abruptly, as a real broken connection would.
    const onError = (): void => {
      pair.destroy(true);
      this.pairs.delete(pair);
    };
    client.on('error', onError);
    upstream.on('error', onError);
    // Clean closes propagate through Channel ('end' -> end()); forget the pair once both are closed.
    const onClose = (): void => {
      if (client.destroyed && upstream.destroyed) this.pairs.delete(pair);
    };
    client.on('close', onClose);
    upstream.on('close', onClose);
  }
}
