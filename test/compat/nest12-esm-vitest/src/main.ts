import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';

const app = await NestFactory.create(AppModule);
// So that SIGTERM releases held locks and closes the connections before exit.
app.enableShutdownHooks();
await app.listen(process.env.PORT ?? 3000, '127.0.0.1');
