// The ESM entry (`import ... from 'nestjs-redlock'`) re-exports the CommonJS build rather than
// shipping a second copy: Nest resolves providers by class identity and errors are matched with
// instanceof, so an app that reaches the package both ways must get one RedlockService class.
export * from './index.js';
