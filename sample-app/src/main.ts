import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';
import type { SampleConfig } from './config/configuration.js';

/** One replica of the wallet app. Run as many as you like against the same masters and store. */
const app = await NestFactory.create(AppModule);
// SIGTERM / SIGINT close the app: the reconciliation timer stops, locks still held are released,
// Redis connections are closed.
app.enableShutdownHooks();
const { host, port, replicaId } = app.get(ConfigService<SampleConfig, true>).get('http', { infer: true });
await app.listen(port, host);
// The demo reads the URL from this line (PORT=0 lets the system pick a free port).
new Logger('Replica').log(`${replicaId} listening on ${await app.getUrl()}`);
