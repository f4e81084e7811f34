import type { ListenContext } from '../src/transport.js';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentError, CallMetrics, createAgent, type Agent, type CallInfo, type Interceptor } from '../src/index.js';
import { memoryTransport } from './memory-transport.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

async function pair(options: { interceptors?: Interceptor[]; inboundInterceptors?: Interceptor[] } = {}) {
  const network = new Map<string, ListenContext>();
  const server = await createAgent({ channels: [memoryTransport(network, 'server')], inboundInterceptors: options.inboundInterceptors });
  const client = await createAgent({ channels: [memoryTransport(network)], interceptors: options.interceptors });
  agents.push(server, client);
  server.handleDuplex('echo', async function* (incoming) {
    for await (const item of incoming) yield item;
  });
  server.handleDuplex('sum', async function* (incoming: AsyncIterable<number>) {
    let total = 0;
    for await (const n of incoming) total += n;
    yield total;
  });
  server.handleStream('tokens', async function* () {
    yield 'a';
  });
  return { server, client, address: server.addresses[0]! };
}

async function rejection(promise: Promise<unknown>): Promise<AgentError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(AgentError);
    return error as AgentError;
  }
  throw new Error('expected a rejection');
}

describe('duplex calls', () => {
  it('echoes items as they are sent and ends when the caller ends', async () => {
    const { client, address } = await pair();
    const call = client.duplex<string, string>(address, 'echo');
    const seen: string[] = [];
    const reader = (async () => {
      for await (const item of call) seen.push(item);
    })();
    for (const word of ['one', 'two', 'three']) await call.send(word);
    await call.end();
    await reader;
    expect(seen).toEqual(['one', 'two', 'three']);
  });

  it('client streaming: many items in, one result out', async () => {
    const { client, address } = await pair();
    const call = client.duplex<number, number>(address, 'sum');
    for (let i = 1; i <= 100; i++) await call.send(i);
    await call.end();
    const results: number[] = [];
    for await (const total of call) results.push(total);
    expect(results).toEqual([5050]);
  });

  it("the caller's abort reason reaches the handler's incoming items and signal", async () => {
    const { server, client, address } = await pair();
    let seenReason: AgentError | undefined;
    let signalReason: unknown;
    const handlerDone = new Promise<void>((resolve) => {
      server.handleDuplex('listen', async function* (incoming, ctx) {
        try {
          for await (const _ of incoming) yield 'ack';
        } catch (error) {
          seenReason = error as AgentError;
          signalReason = ctx.signal.reason;
        } finally {
          resolve();
        }
      });
    });
    const call = client.duplex(address, 'listen');
    const iterator = call[Symbol.asyncIterator]();
    await call.send('hello');
    expect((await iterator.next()).value).toBe('ack');
    call.abort('user pressed stop');
    await handlerDone;
    expect(seenReason).toMatchObject({ code: 'CANCELLED', message: 'user pressed stop', remote: true });
    expect(signalReason).toBe(seenReason);
    expect((await rejection(iterator.next())).message).toBe('user pressed stop');
    expect((await rejection(call.send('more'))).code).toBe('CANCELLED');
  });

  it("the handler's error reaches the caller's loop and fails later sends", async () => {
    const { server, client, address } = await pair();
    server.handleDuplex('refuse-after-one', async function* (incoming) {
      for await (const item of incoming) {
        yield item;
        throw new AgentError('CANCELLED', 'the model was interrupted');
      }
    });
    const call = client.duplex(address, 'refuse-after-one');
    await call.send('x');
    const items: unknown[] = [];
    const error = await rejection(
      (async () => {
        for await (const item of call) items.push(item);
      })(),
    );
    expect(items).toEqual(['x']);
    expect(error).toMatchObject({ code: 'CANCELLED', message: 'the model was interrupted', remote: true });
    expect(await rejection(call.send('y'))).toBe(error);
  });

  it('modes must match: a stream method refuses duplex, a duplex method refuses stream; unknown is NO_HANDLER', async () => {
    const { client, address } = await pair();
    const drain = async (iterable: AsyncIterable<unknown>) => {
      for await (const _ of iterable);
    };
    expect((await rejection(drain(client.duplex(address, 'tokens')))).code).toBe('INVALID_ARGUMENT');
    expect((await rejection(drain(client.stream(address, 'echo')))).code).toBe('INVALID_ARGUMENT');
    expect((await rejection(client.send(address, 'echo', 1))).code).toBe('INVALID_ARGUMENT');
    expect((await rejection(drain(client.duplex(address, 'nope')))).code).toBe('NO_HANDLER');
  });

  it('send after end is INVALID_ARGUMENT; send after the handler finished rejects', async () => {
    const { client, address } = await pair();
    const call = client.duplex(address, 'sum');
    await call.send(1);
    await call.end();
    expect((await rejection(call.send(2))).code).toBe('INVALID_ARGUMENT');
    for await (const _ of call);
    const done = client.duplex(address, 'sum');
    await done.end();
    for await (const _ of done);
    expect((await rejection(done.send(3))).code).toBe('INVALID_ARGUMENT');
  });

  it('interceptors and metrics see duplex calls in both directions, with metadata', async () => {
    const seen: CallInfo[] = [];
    const observe: Interceptor = (next) => (call, handler) => {
      seen.push(call);
      next(call, handler);
    };
    const metrics = new CallMetrics();
    const { server, client, address } = await pair({ interceptors: [metrics.interceptor, observe], inboundInterceptors: [metrics.inboundInterceptor, observe] });
    server.handleDuplex('meta', async function* (incoming, ctx) {
      for await (const _ of incoming) yield ctx.metadata['trace'];
    });
    const call = client.duplex(address, 'meta', { metadata: { trace: 't-1' }, priority: 'high' });
    await call.send(null);
    await call.end();
    const items: unknown[] = [];
    for await (const item of call) items.push(item);
    expect(items).toEqual(['t-1']);
    expect(seen.map((c) => [c.direction, c.mode, c.priority])).toEqual([
      ['outbound', 'duplex', 'high'],
      ['inbound', 'duplex', 'high'],
    ]);
    expect(metrics.prometheus()).toMatch(/method="meta"/);
  });
});
