import { Global, Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import type { SampleConfig } from '../config/configuration.js';
import { Store } from './store.js';

@Global()
@Module({
  providers: [
    {
      provide: Store,
      inject: [ConfigService],
      useFactory: (config: ConfigService<SampleConfig, true>) => {
        const { url, keyPrefix } = config.get('store', { infer: true });
        return new Store(url, keyPrefix);
      },
    },
  ],
  exports: [Store],
})
export class StoreModule {}
