export { lockGraphQLError } from './lock-graphql-error.js';
export type { LockErrorPayload } from '../lock-error-payload.js';
