import { AgentError, type Interceptor } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAgents, dialOnlyAgent, wsAgent } from './helpers.js';

afterEach(closeAgents);

/** The AgentError a promise rejects with (fails the test if it fulfils or rejects with anything else). */
async function agentErrorOf(promise: Promise<unknown>): Promise<AgentError> {
  const error = await promise.then(
    (value) => new Error(`fulfilled with ${JSON.stringify(value)}`),
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(AgentError);
  return error as AgentError;
}

describe('values a call carries, over real WebSocket channels', () => {
  // A Date was sent as MessagePack's timestamp extension, which the peer's decoder refuses: the caller saw
  // "stream reset by peer (PROTOCOL_ERROR)" and nothing of why. It is refused where it is encoded instead.
  it('a Date is refused by the side sending it, with what to send instead; the call after it works', async () => {
    const server = await wsAgent();
    server.handle('echo', (value: unknown) => value);
    server.handle('now', () => ({ at: new Date(0) }));
    server.handleStream('dates', async function* () {
      yield 'first';
      yield { at: new Date(0) };
      yield 'never';
    });
    const client = await dialOnlyAgent();
    const peer = server.addresses[0]!;

    const request = await agentErrorOf(client.send(peer, 'echo', { at: new Date(0) }));
    expect(request.code).toBe('INVALID_ARGUMENT');
    expect(request.message).toMatch(/cannot encode request: it holds a Date.*date\.toISOString\(\) or date\.getTime\(\)/);

    const response = await agentErrorOf(client.send(peer, 'now', null));
    expect(response.message).toMatch(/it holds a Date.*date\.toISOString\(\)/);
    expect(response.code).not.toBe('PROTOCOL_ERROR');

    const items: unknown[] = [];
    const item = await agentErrorOf(
      (async () => {
        for await (const value of client.stream(peer, 'dates', null)) items.push(value);
      })(),
    );
    expect(items).toEqual(['first']);
    expect(item.message).toMatch(/it holds a Date/);
    expect(item.code).not.toBe('PROTOCOL_ERROR');

    // Bodies with 0xff bytes that are no extension (an int, a float, bytes) still go through, and the channel is fine.
    const again = { minusOne: -1, byte: 255, float: 1.7976931348623157e308, bytes: Buffer.from([0xff, 0xd6, 0xff]), at: new Date(0).toISOString() };
    expect(await client.send(peer, 'echo', again)).toEqual(again);
  });

  // A unary handler's response that could not be encoded was dropped: the caller waited for its deadline.
  it('a response past the frame limit reaches the caller as FRAME_TOO_LARGE, not as its deadline', async () => {
    const server = await wsAgent({ maxFrameSize: 64 * 1024 });
    server.handle('big', () => 'x'.repeat(100 * 1024));
    server.handle('small', () => 'ok');
    const client = await dialOnlyAgent({ defaultTimeoutMs: 600_000 });
    const peer = server.addresses[0]!;
    const error = await agentErrorOf(client.send(peer, 'big', null));
    expect(error.code).toBe('FRAME_TOO_LARGE');
    expect(error.message).toMatch(/response frame of \d+ bytes exceeds the 65536-byte limit/);
    expect(await client.send(peer, 'small', null)).toBe('ok');
  });

  // An inbound interceptor that turns a reply it has passed on into an error (an audit step) makes the held
  // response go out before that error. A response that cannot be encoded threw out of onError there: the error
  // was never sent and the caller waited for its deadline.
  it('an interceptor failing a call whose response cannot be encoded: the caller hears the interceptor\'s error at once', async () => {
    const audit: Interceptor = (next) => (call, handler) =>
      next(call, {
        ...handler,
        onResponse: (body) => handler.onResponse?.(body),
        onEnd: () => handler.onError(new AgentError('PERMISSION_DENIED', 'audit refused the reply')),
        onError: (error) => handler.onError(error),
      });
    const server = await wsAgent({ inboundInterceptors: [audit] });
    server.handle('now', () => ({ at: new Date(0) }));
    server.handle('fine', () => 'ok');
    const client = await dialOnlyAgent({ defaultTimeoutMs: 600_000 });
    const peer = server.addresses[0]!;
    const error = await agentErrorOf(client.send(peer, 'now', null));
    expect([error.code, error.message]).toEqual(['PERMISSION_DENIED', 'audit refused the reply']);
    // An encodable held response still goes out first (the order the reply's writer keeps): the caller has it.
    expect(await client.send(peer, 'fine', null)).toBe('ok');
    expect(await client.send(peer, 'now', null).catch((e: AgentError) => e.code)).toBe('PERMISSION_DENIED');
  });
});
