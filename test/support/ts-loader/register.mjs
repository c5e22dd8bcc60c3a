// `node --import ./test/support/ts-loader/register.mjs file.ts`: runs the project's TypeScript in
// child processes (safety workers, benchmark workers) the way vitest compiles it for tests:
// oxc, the transformer Vite 8 uses, with legacy decorators and decorator metadata for Nest.
import 'reflect-metadata';
import { register } from 'node:module';

// oxc emits calls to these helpers; they are tslib's __decorate, __param and __metadata.
globalThis.babelHelpers ??= {
  decorate(decorators, target, key, desc) {
    const argc = arguments.length;
    let result = argc < 3 ? target : desc === null ? (desc = Object.getOwnPropertyDescriptor(target, key)) : desc;
    for (let i = decorators.length - 1; i >= 0; i--) {
      const decorator = decorators[i];
      if (decorator) result = (argc < 3 ? decorator(result) : argc > 3 ? decorator(target, key, result) : decorator(target, key)) || result;
    }
    if (argc > 3 && result) Object.defineProperty(target, key, result);
    return result;
  },
  decorateParam(index, decorator) {
    return (target, key) => decorator(target, key, index);
  },
  decorateMetadata(key, value) {
    return Reflect.metadata(key, value);
  },
};

register('./hooks.mjs', import.meta.url);
