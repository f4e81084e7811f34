import { once } from 'node:events';
import { AgentError, createAgent, Identity, type Agent, type CallContext } from '@agentlink/core';
import { encodeFrame, selfSignedCertificate, type Channel, type ChannelStream } from '@agentlink/core/transport';
import { afterEach, describe, expect, it } from 'vitest';
import { quic, type QuicOptions } from '../src/index.js';
import type { QuicChannel } from '../src/quic-channel.js';

/**
 * agentlink/2 (docs/protocol.md "Ending with the request"): between two engines that know it, a unary or streamed
 * call's request carries the caller's end, and the caller gives up by STOP_SENDING with the code. An engine that
 * knows only agentlink/1 (the `legacyProtocol` hook) is met with agentlink/1's way, both ways round.
 */

const agents: Agent[] = [];
const channels: Channel[] = [];
afterEach(async () => {
  await Promise.all(channels.splice(0).map((c) => c.close()));
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

/** What a handler's `ctx.signal` said when it aborted: its code and text. */
interface Seen {
  code: string;
  message: string;
}

/** A handler's signal, once it aborts. */
function abortOf(ctx: CallContext): Promise<Seen> {
  return once(ctx.signal, 'abort').then(() => {
    const reason = ctx.signal.reason as AgentError;
    return { code: reason.code, message: reason.message };
  });
}

/**
 * A server whose handlers wait until told: `slow` answers when `release` is called (or reports its abort),
 * `waiting` streams one token then waits for ever (a producer that waits), `echo` answers at once.
 */
async function server(options: QuicOptions = {}) {
  const started: Array<(ctx: CallContext) => void> = [];
  const nextStart = (): Promise<CallContext> => new Promise((resolve) => started.push(resolve));
  const aborts: Promise<Seen>[] = [];
  let release: (() => void) | undefined;
  const a = await createAgent({ channels: [quic({ port: 0, ...options })] });
  a.handle('echo', (body: unknown) => body);
  a.handle('slow', async (_body: unknown, ctx) => {
    aborts.push(abortOf(ctx));
    const answered = new Promise<string>((resolve) => (release = () => resolve('answered')));
    started.shift()?.(ctx);
    return answered;
  });
  a.handleStream('waiting', async function* (_body: unknown, ctx) {
    aborts.push(abortOf(ctx));
    yield 'first';
    started.shift()?.(ctx);
    await new Promise<never>(() => undefined);
  });
  agents.push(a);
  return { agent: a, nextStart, aborts, release: () => release?.() };
}

async function client(options: QuicOptions = {}): Promise<Agent> {
  const a = await createAgent({ channels: [quic(options)] });
  agents.push(a);
  return a;
}

/** A bare QUIC channel to `to` (the engine's own view: its protocol, its streams). */
async function dial(to: Agent, options: QuicOptions = {}): Promise<QuicChannel> {
  const address = to.addresses[0]!;
  const identity = Identity.generate();
  const channel = (await quic(options).dial(new URL(address.slice(address.indexOf('@') + 1)), {
    identity,
    tls: selfSignedCertificate(identity),
    onStream: (stream) => stream.reset(new AgentError('NO_HANDLER', 'serves nothing')),
    expectedPeer: to.id,
    signal: AbortSignal.timeout(10_000),
  })) as QuicChannel;
  channels.push(channel);
  return channel;
}

const request = (method: string, mode: 'unary' | 'stream' = 'unary'): Uint8Array =>
  encodeFrame({ type: 'request', method, timeoutMs: null, priority: 'normal', metadata: {}, body: null, mode });

describe('agentlink/2: the request carries the caller end', () => {
  it('two current engines negotiate agentlink/2; a peer offering only agentlink/1 gets agentlink/1, either side', async () => {
    const current = await server();
    const legacy = await server({ legacyProtocol: true });
    expect((await dial(current.agent)).protocol).toBe('agentlink/2');
    expect((await dial(legacy.agent)).protocol).toBe('agentlink/1');
    expect((await dial(current.agent, { legacyProtocol: true })).protocol).toBe('agentlink/1');
  });

  /**
   * After the caller's end reached the server (a second call on the channel makes a full round trip behind it), the
   * waiting handler is not cancelled; released, its reply arrives on `stream`.
   */
  async function expectNoCancelThenReply(channel: Channel, ctx: { signal: AbortSignal }, stream: ChannelStream, release: () => void): Promise<void> {
    const echo = await channel.openStream({ endsWithPeer: true, endsWithRequest: true });
    await echo.endWith!(request('echo'));
    while (await echo.read());
    expect(ctx.signal.aborted).toBe(false);
    release();
    let bytes = 0;
    for (let chunk = await stream.read(); chunk; chunk = await stream.read()) bytes += chunk.length;
    expect(bytes).toBeGreaterThan(0);
  }

  it('on agentlink/2 a unary stream ends our side with the request, and a handler that waits sees no cancel from that end', async () => {
    const s = await server();
    const channel = await dial(s.agent);
    const stream = await channel.openStream({ endsWithPeer: true, endsWithRequest: true });
    expect(stream.endsWithRequest).toBe(true);
    const started = s.nextStart();
    await stream.endWith!(request('slow'));
    await expectNoCancelThenReply(channel, await started, stream, s.release);
    await stream.end(); // core's end after the reply: nothing left to do
    expect(channel.activeStreams).toBe(0);
  });

  it('a stream opened without endsWithPeer keeps its own end: a caller that ends early anyway is still no cancel on agentlink/2', async () => {
    const s = await server();
    const channel = await dial(s.agent);
    const stream = await channel.openStream();
    expect(stream.endsWithRequest).toBe(false);
    const started = s.nextStart();
    await stream.write(request('slow'));
    const ctx = await started;
    await stream.end();
    await expectNoCancelThenReply(channel, ctx, stream, s.release);
  });

  for (const legacy of ['none', 'server', 'client'] as const) {
    const protocol = legacy === 'none' ? 'agentlink/2' : 'agentlink/1';
    const serverOptions = { legacyProtocol: legacy === 'server' };
    const clientOptions = { legacyProtocol: legacy === 'client' };

    it(`${protocol} (${legacy === 'none' ? 'both current' : `legacy ${legacy}`}): a unary handler that waits sees the caller's abort with its code`, async () => {
      const s = await server(serverOptions);
      const c = await client(clientOptions);
      const controller = new AbortController();
      const started = s.nextStart();
      const call = c.send(s.agent.addresses[0]!, 'slow', null, { signal: controller.signal });
      const ctx = await started;
      // A whole other call first: our request's end (agentlink/2) reached the handler and did not abort it.
      expect(await c.send(s.agent.addresses[0]!, 'echo', 'ping')).toBe('ping');
      expect(ctx.signal.aborted).toBe(false);
      controller.abort(new AgentError('CANCELLED', 'the user gave up'));
      await expect(call).rejects.toMatchObject({ code: 'CANCELLED' });
      const seen = await s.aborts[0]!;
      expect(seen.code).toBe('CANCELLED');
      // The reason's text travels in agentlink/1's cancel message; agentlink/2's stop carries the code alone.
      if (protocol === 'agentlink/1') expect(seen.message).toBe('the user gave up');
      else expect(seen.message).toBe('the caller stopped the call (CANCELLED)');
    });

    it(`${protocol}: a unary handler that waits past the caller's deadline sees DEADLINE_EXCEEDED`, async () => {
      const s = await server(serverOptions);
      const c = await client(clientOptions);
      await c.send(s.agent.addresses[0]!, 'echo', 'warm'); // the channel is up: the deadline times the call alone
      const call = c.send(s.agent.addresses[0]!, 'slow', null, { timeoutMs: 100 });
      await expect(call).rejects.toMatchObject({ code: 'DEADLINE_EXCEEDED' });
      expect((await s.aborts[0]!).code).toBe('DEADLINE_EXCEEDED');
    });

    it(`${protocol}: leaving \`for await\` on a token stream whose producer waits cancels it`, async () => {
      const s = await server(serverOptions);
      const c = await client(clientOptions);
      const started = s.nextStart();
      for await (const token of c.stream(s.agent.addresses[0]!, 'waiting', null)) {
        expect(token).toBe('first');
        const ctx = await started;
        expect(ctx.signal.aborted).toBe(false);
        break;
      }
      expect((await s.aborts[0]!).code).toBe('CANCELLED');
    });

    it(`${protocol}: calls answer${protocol === 'agentlink/2' ? ', and the handler frees its stream with its reply' : ''}`, async () => {
      const s = await server(serverOptions);
      const c = await client(clientOptions);
      for (let i = 0; i < 20; i++) expect(await c.send(s.agent.addresses[0]!, 'echo', i)).toBe(i);
      // A request larger than one engine write takes (two frame segments, past the 16 KiB last-write path).
      const large = 'x'.repeat(300_000);
      expect(await c.send(s.agent.addresses[0]!, 'echo', large)).toBe(large);
      const started = s.nextStart();
      const slow = c.send(s.agent.addresses[0]!, 'slow', large); // a handler that waits, after a large request
      await started;
      s.release();
      expect(await slow).toBe('answered');
      // agentlink/2: the caller's end came with its request, so the handler's stream (and its wait for a stop)
      // is released as its reply is written, before the reply reaches us. On agentlink/1 it waits for our end.
      if (protocol === 'agentlink/2') expect(s.agent.channels().map((channel) => channel.activeStreams)).toEqual([0]);
    });
  }
});

describe('agentlink/2: hostile callers', () => {
  it('a request and its end, then STOP_SENDING with a code: the handler sees that code', async () => {
    const s = await server();
    const channel = await dial(s.agent);
    const stream = await channel.openStream({ endsWithPeer: true, endsWithRequest: true });
    const started = s.nextStart();
    await stream.endWith!(request('slow'));
    await started;
    stream.reset(new AgentError('RESOURCE_EXHAUSTED', 'gone'));
    expect((await s.aborts[0]!).code).toBe('RESOURCE_EXHAUSTED');
  });

  for (const legacyProtocol of [false, true]) {
    it(`${legacyProtocol ? 'agentlink/1' : 'agentlink/2'}: a unary handler that waits sees its caller's connection close`, async () => {
      const s = await server({ legacyProtocol });
      const channel = await dial(s.agent);
      const stream = await channel.openStream({ endsWithPeer: true, endsWithRequest: true });
      expect(stream.endsWithRequest).toBe(!legacyProtocol);
      const started = s.nextStart();
      if (stream.endsWithRequest) await stream.endWith!(request('slow'));
      else await stream.write(request('slow'));
      const ctx = await started;
      expect(ctx.signal.aborted).toBe(false);
      await channel.close(); // CONNECTION_CLOSE: no stream of it is reset or stopped on its own
      // Before: on agentlink/2 the engine's wait for a stop ended with the connection as if our side were done,
      // so the handler (no deadline) waited for ever.
      expect((await s.aborts[0]!).code).toBe('UNAVAILABLE');
    });
  }

  it('a request and its end on an agentlink/1 connection is a cancel, as before agentlink/2', async () => {
    const s = await server({ legacyProtocol: true });
    const channel = await dial(s.agent);
    const stream = await channel.openStream({ endsWithPeer: true, endsWithRequest: true });
    expect(stream.endsWithRequest).toBe(false);
    const started = s.nextStart();
    await stream.write(request('slow'));
    await started;
    await stream.end();
    expect(await s.aborts[0]!).toEqual({ code: 'CANCELLED', message: 'caller ended the stream' });
  });

  it('a stream request and its end, then nothing: the producer runs on until the stop comes', async () => {
    const s = await server();
    const channel = await dial(s.agent);
    const stream = await channel.openStream({ endsWithPeer: true, endsWithRequest: true });
    const started = s.nextStart();
    await stream.endWith!(request('waiting', 'stream'));
    const ctx = await started;
    expect(await stream.read()).toBeDefined(); // the first token
    expect(ctx.signal.aborted).toBe(false);
    stream.reset(new AgentError('CANCELLED', 'enough'));
    expect((await s.aborts[0]!).code).toBe('CANCELLED');
  });
});
