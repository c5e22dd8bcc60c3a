import { NestFactory } from '@nestjs/core';
import { FixtureModule } from './fixture.module';

async function bootstrap() {
  const app = await NestFactory.create(FixtureModule);
  app.enableShutdownHooks();
  await app.listen(process.env.PORT ?? 3000, '127.0.0.1');
}
void bootstrap();
