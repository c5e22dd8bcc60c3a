import { createServer } from 'node:net';

/** The developer's shared Redis lives here; tests must never bind or connect to it. */
const RESERVED_PORT = 6379;

function bindEphemeral(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : undefined;
      server.close(() => {
        if (port === undefined) reject(new Error('freePort: server has no TCP address'));
        else resolvePort(port);
      });
    });
  });
}

/**
 * A TCP port on 127.0.0.1 that was free a moment ago. The port is released before
 * returning, so another process may grab it first: callers that bind it later
 * (redis-server) must be ready to retry with a new port.
 *
 * Never returns 6379. The kernel's ephemeral range normally starts far above it,
 * but a tuned `ip_local_port_range` could include it, so check rather than assume.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await bindEphemeral();
    if (port !== RESERVED_PORT) return port;
  }
  throw new Error('freePort: kernel kept handing out the reserved port 6379');
}
