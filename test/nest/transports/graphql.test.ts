import 'reflect-metadata';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { type INestApplication, type Type } from '@nestjs/common';
import { Args, Context, Field, GraphQLModule, ID, InputType, Mutation, ObjectType, Query, ResolveField, Resolver, Parent } from '@nestjs/graphql';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RedlockConfigError, RedlockModule, RedlockService, WithLock } from '../../../lib/index.js';
import { RedisFleet } from '../../support/redis-fleet.js';
import { ConcurrencyProbe, deferred, fleetOptions, urlOf } from '../nest-helpers.js';

// @WithLock on resolvers of a real GraphQL API (@nestjs/graphql code-first, @nestjs/apollo's
// driver, Apollo Server 5), queried over HTTP with supertest: keys read the resolver's
// parameters (@Args('id'), @Context()), two replicas on the same masters exclude each other,
// and lock failures reach the client as GraphQL errors with extensions.code.

let fleet: RedisFleet;
beforeAll(async () => {
  fleet = await RedisFleet.start(3);
});
const apps: INestApplication[] = [];
afterEach(async () => {
  state.gate.resolve();
  await Promise.allSettled(apps.splice(0).map((app) => app.close()));
  for (const node of fleet.nodes) if (!node.running) await fleet.start(node.index);
});
afterAll(async () => {
  await fleet?.stopAll();
});

const state = { probe: new ConcurrencyProbe(), entered: deferred(), gate: deferred(), ran: 0 };
beforeEach(() => Object.assign(state, { probe: new ConcurrencyProbe(), entered: deferred(), gate: deferred(), ran: 0 }));

@ObjectType()
class Payment {
  @Field(() => ID)
  orderId!: string;

  @Field(() => [String], { nullable: true })
  lock?: string[];
}

@InputType()
class CustomerInput {
  @Field({ nullable: true })
  id?: string;
}

@Resolver(() => Payment)
class PaymentsResolver {
  constructor(private readonly redlock: RedlockService) {}

  @Query(() => String)
  ping() {
    return 'pong';
  }

  @Mutation(() => Payment)
  @WithLock('order:{0}', 2_000)
  async pay(@Args('orderId', { type: () => ID }) orderId: string) {
    await state.probe.section(5);
    return { orderId };
  }

  @Mutation(() => Payment)
  async payUnlocked(@Args('orderId', { type: () => ID }) orderId: string) {
    await state.probe.section(5);
    return { orderId };
  }

  /** {1} is the second parameter, the customer argument, not the resolver's second argument (all arguments). */
  @Mutation(() => Payment)
  @WithLock('customer:{1.id}', { ttlMs: 2_000, onLocked: 'fail' })
  refund(@Context('req') _req: unknown, @Args('customer') _customer: CustomerInput, @Args('orderId', { type: () => ID }) orderId: string) {
    return { orderId, lock: this.redlock.currentLock()?.resources };
  }

  @Mutation(() => Payment)
  @WithLock('order:{0}', 2_000)
  async hold(@Args('orderId', { type: () => ID }) orderId: string) {
    state.entered.resolve();
    await state.gate.promise;
    return { orderId };
  }

  @Mutation(() => Payment)
  @WithLock('order:{0}', { ttlMs: 2_000, onLocked: 'fail' })
  payNow(@Args('orderId', { type: () => ID }) orderId: string) {
    return { orderId };
  }

  @Mutation(() => Payment, { nullable: true })
  @WithLock('order:{0}', { ttlMs: 2_000, onLocked: 'skip' })
  payIfIdle(@Args('orderId', { type: () => ID }) orderId: string) {
    state.ran++;
    return { orderId };
  }
}

async function replica(extra: { resolvers?: Type[]; fieldResolverEnhancers?: ('interceptors' | 'guards' | 'filters')[] } = {}) {
  const moduleRef = await Test.createTestingModule({
    imports: [
      RedlockModule.forRoot({ ...fleetOptions(fleet), isGlobal: true }),
      GraphQLModule.forRoot<ApolloDriverConfig>({
        driver: ApolloDriver,
        autoSchemaFile: true,
        graphiql: false,
        context: ({ req }: { req: unknown }) => ({ req }),
        fieldResolverEnhancers: extra.fieldResolverEnhancers,
      }),
    ],
    providers: extra.resolvers ?? [PaymentsResolver],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  apps.push(app);
  await app.listen(0, '127.0.0.1');
  const url = urlOf(app);
  return (query: string, variables: Record<string, unknown> = {}) =>
    // Started now (supertest sends nothing until then is called), awaited by the caller.
    request(url)
      .post('/graphql')
      .set('content-type', 'application/json')
      .send({ query, variables })
      .then((response) => response);
}

const PAY = (field: string) => `mutation ($orderId: ID!) { ${field}(orderId: $orderId) { orderId lock } }`;

describe('@WithLock on a GraphQL resolver over HTTP', () => {
  it('serialises the same order across two replicas (and the probe does see overlap without the lock)', async () => {
    const [a, b] = await Promise.all([replica(), replica()]);
    await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b)(PAY('payUnlocked'), { orderId: '1' })));
    expect(state.probe.max).toBeGreaterThan(1);

    state.probe = new ConcurrencyProbe();
    const replies = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b)(PAY('pay'), { orderId: '1' })));
    expect(replies.map((reply) => reply.body)).toEqual(Array.from({ length: 8 }, () => ({ data: { pay: { orderId: '1', lock: null } } })));
    expect(state.probe.entries).toBe(8);
    expect(state.probe.max).toBe(1);
  });

  it("reads {N} as the resolver's Nth parameter, as @Args and @Context resolve it", async () => {
    const graphql = await replica();
    const reply = await graphql('mutation { refund(customer: { id: "c-7" }, orderId: "5") { orderId lock } }');
    expect(reply.body).toEqual({ data: { refund: { orderId: '5', lock: ['customer:c-7'] } } });
  });

  it('answers a lock held by another replica with a CONFLICT error, and skips under onLocked: skip', async () => {
    const [a, b] = await Promise.all([replica(), replica()]);
    const holding = a(PAY('hold'), { orderId: '9' });
    await state.entered.promise;
    const reply = await b(PAY('payNow'), { orderId: '9' });
    expect(reply.body.data).toBeNull();
    expect(reply.body.errors).toEqual([
      expect.objectContaining({
        message: 'order:9 is locked by another operation; retry later',
        path: ['payNow'],
        extensions: expect.objectContaining({
          code: 'CONFLICT',
          lockCode: 'LOCK_HELD',
          resources: ['order:9'],
          retryAfterMs: expect.any(Number),
        }),
      }),
    ]);
    // Under onLocked: 'skip' the resolver does not run and the field is null, without an error.
    expect((await b(PAY('payIfIdle'), { orderId: '9' })).body).toEqual({ data: { payIfIdle: null } });
    expect(state.ran).toBe(0);
    state.gate.resolve();
    expect((await holding).body).toEqual({ data: { hold: { orderId: '9', lock: null } } });
  });

  it("answers arguments that cannot form the key with BAD_USER_INPUT, naming the placeholder", async () => {
    const graphql = await replica();
    const reply = await graphql('mutation { refund(customer: {}, orderId: "5") { orderId } }');
    expect(reply.body.errors).toEqual([
      expect.objectContaining({
        message:
          'invalid {1.id} in lock key "customer:{1.id}": undefined (expected a string, a number, a bigint, a boolean or an object with its own toString())',
        extensions: expect.objectContaining({ code: 'BAD_USER_INPUT', lockCode: 'INVALID_ARGUMENT', placeholder: '{1.id}' }),
      }),
    ]);
  });

  it('answers too few masters with SERVICE_UNAVAILABLE', async () => {
    const graphql = await replica();
    await Promise.all([fleet.kill(0), fleet.kill(1)]);
    const reply = await graphql(PAY('payNow'), { orderId: '3' });
    expect(reply.body.errors).toEqual([
      expect.objectContaining({
        message: 'the lock on order:3 cannot be taken: too few lock servers are reachable',
        extensions: expect.objectContaining({ code: 'SERVICE_UNAVAILABLE', lockCode: 'QUORUM_UNREACHABLE', resources: ['order:3'] }),
      }),
    ]);
  });
});

@Resolver(() => Payment)
class ReceiptResolver {
  constructor(private readonly redlock: RedlockService) {}

  @Query(() => Payment)
  payment() {
    return { orderId: '1' };
  }

  @ResolveField(() => String)
  @WithLock('receipt:{0.orderId}')
  receipt(@Parent() payment: Payment) {
    return `receipt ${payment.orderId} under ${this.redlock.currentLock()?.resources.join()}`;
  }
}

describe('@WithLock on a field resolver', () => {
  it("is refused at bootstrap unless the GraphQL module runs interceptors on field resolvers", async () => {
    const error = await replica({ resolvers: [ReceiptResolver] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedlockConfigError);
    expect((error as Error).message).toMatch(/^@WithLock on ReceiptResolver\.receipt: a field resolver runs interceptors only with/);

    const graphql = await replica({ resolvers: [ReceiptResolver], fieldResolverEnhancers: ['interceptors'] });
    expect((await graphql('{ payment { orderId receipt } }')).body).toEqual({ data: { payment: { orderId: '1', receipt: 'receipt 1 under receipt:1' } } });
  });
});
