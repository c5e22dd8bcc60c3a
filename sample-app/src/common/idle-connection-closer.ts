import { Injectable, type BeforeApplicationShutdown, type OnApplicationShutdown } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { Server } from 'node:http';

/**
 * Graceful shutdown without the wait: Nest closes the HTTP server and waits for every connection
 * to end before its shutdown hooks run (RedlockService releases its locks only then, so requests
 * in flight keep theirs until they finish). Node closes the connections that are idle at that
 * moment, but a keep-alive connection whose request was still running stays open, idle, until
 * the client drops it: seconds of nothing. Close such connections as soon as they go idle.
 */
@Injectable()
export class IdleConnectionCloser implements BeforeApplicationShutdown, OnApplicationShutdown {
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly adapterHost: HttpAdapterHost) {}

  beforeApplicationShutdown(): void {
    const server = this.adapterHost.httpAdapter?.getHttpServer() as Server | undefined;
    if (!server) return;
    this.timer = setInterval(() => server.closeIdleConnections(), 100);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    clearInterval(this.timer);
  }
}
