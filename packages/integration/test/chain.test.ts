import { AgentError, createAgent, type Agent, type CallContext, type Transport } from '@agentlink/core';
import { http2 } from '@agentlink/http2';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { gate } from './helpers.js';

/**
 * Agents in a chain, as fleets are built: a user calls an orchestrator, whose handler streams from a model and
 * forwards the tokens (transformed), passing its `ctx.signal` to the nested call — the one thing the docs ask
 * of it. What the user does (cancel, deadline) must reach the model; what the model does (throw) must reach the
 * user, with its code and text, on every channel.
 */
const CHANNELS: Array<[string, (listen: boolean) => Transport]> = [
  ['WebSocket', (listen) => webSocket(listen ? { port: 0, host: '127.0.0.1' } : {})],
  ['HTTP/2', (listen) => http2(listen ? { port: 0, host: '127.0.0.1' } : {})],
  ['QUIC', (listen) => quic(listen ? { port: 0, host: '127.0.0.1' } : {})],
];

const started: Agent[] = [];
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(started.splice(0).map((agent) => agent.close()));
});

/** What one hop's handler saw of its call. */
interface Seen {
  context?: CallContext;
  aborted: Promise<AgentError>;
  ended: Promise<void>;
}

function watch(context: CallContext, seen: Seen[]): { ended(): void } {
  const ended = gate();
  const aborted = new Promise<AgentError>((resolve) => context.signal.addEventListener('abort', () => resolve(context.signal.reason as AgentError)));
  seen.push({ context, aborted, ended: ended.wait });
  return { ended: ended.open };
}

async function chain(channel: (listen: boolean) => Transport) {
  const [model, orchestrator, user] = await Promise.all([createAgent({ channels: [channel(true)] }), createAgent({ channels: [channel(true)] }), createAgent({ channels: [channel(false)] })]);
  started.push(user, orchestrator, model);
  const modelAddress = model.addresses[0]!;
  const atModel: Seen[] = [];
  const atOrchestrator: Seen[] = [];
  const firstToken = gate();

  // The model: a few tokens, then it thinks until cancelled (or throws, when asked to).
  model.handleStream('generate', async function* ({ fail }: { fail?: 'typed' | 'plain' }, ctx) {
    const seen = watch(ctx, atModel);
    try {
      yield 'hello';
      yield 'world';
      if (fail === 'typed') throw new AgentError('RESOURCE_EXHAUSTED', 'model quota used up');
      if (fail === 'plain') throw new Error('model exploded');
      firstToken.open();
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
    } finally {
      seen.ended();
    }
  });
  model.handle('summarize', (_body: unknown, ctx) => {
    watch(ctx, atModel).ended();
    return 'short';
  });

  // The orchestrator, written as the docs show: the nested call gets `ctx.signal`, nothing else.
  orchestrator.handleStream('relay', async function* (body: { fail?: 'typed' | 'plain' }, ctx) {
    const seen = watch(ctx, atOrchestrator);
    try {
      for await (const token of orchestrator.stream<string>(modelAddress, 'generate', body, { signal: ctx.signal })) yield token.toUpperCase();
    } finally {
      seen.ended();
    }
  });
  orchestrator.handle('brief', async (body: { timeoutMs?: number } | null, ctx) => {
    watch(ctx, atOrchestrator).ended();
    return orchestrator.send<string>(modelAddress, 'summarize', null, { signal: ctx.signal, timeoutMs: body?.timeoutMs });
  });
  return { user, address: orchestrator.addresses[0]!, atModel, atOrchestrator, firstToken };
}

async function read(iterable: AsyncIterable<string>, tokens: string[]): Promise<AgentError | undefined> {
  try {
    for await (const token of iterable) tokens.push(token);
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(AgentError);
    return error as AgentError;
  }
}

describe.each(CHANNELS)('a user → orchestrator → model chain over %s', (_name, channel) => {
  // Before: the nested call got the cancel through `ctx.signal`, but not the deadline itself. The model's
  // `ctx.deadline` was undefined on a stream (and the agent's 30 s default on `send`), so a model could not plan
  // by it, and the nested call outlived the user's deadline wherever the cancel did not arrive.
  it("the user's deadline is the model's deadline, through the orchestrator's ctx.signal", async () => {
    const { user, address, atModel, atOrchestrator, firstToken } = await chain(channel);
    await user.send(address, 'brief', null); // channels up, before the clock stops
    atModel.length = 0;
    atOrchestrator.length = 0;
    vi.useFakeTimers({ toFake: ['Date'] }); // Date.now() stands still: the deadlines compare exactly

    expect(await user.send(address, 'brief', null, { timeoutMs: 5_000 })).toBe('short');
    expect(atOrchestrator[0]!.context!.deadline).toBe(Date.now() + 5_000);
    expect(atModel[0]!.context!.deadline).toBe(Date.now() + 5_000); // not the agent's default of 30 s
    await user.send(address, 'brief', { timeoutMs: 1_000 }, { timeoutMs: 5_000 }); // a sooner one of its own is kept
    expect(atModel[1]!.context!.deadline).toBe(Date.now() + 1_000);
    await user.send(address, 'brief', { timeoutMs: 9_000 }, { timeoutMs: 5_000 }); // a later one is cut to the user's
    expect(atModel[2]!.context!.deadline).toBe(Date.now() + 5_000);
    atModel.length = 0;
    atOrchestrator.length = 0;

    const tokens: string[] = [];
    const controller = new AbortController();
    const reading = read(user.stream<string>(address, 'relay', {}, { timeoutMs: 60_000, signal: controller.signal }), tokens);
    await firstToken.wait;
    expect(atOrchestrator[0]!.context!.deadline).toBe(Date.now() + 60_000);
    expect(atModel[0]!.context!.deadline).toBe(Date.now() + 60_000);
    controller.abort();
    expect((await reading)?.code).toBe('CANCELLED');
  });

  it("the user's deadline passing stops the model: each hop sees DEADLINE_EXCEEDED", async () => {
    const { user, address, atModel, atOrchestrator, firstToken } = await chain(channel);
    await user.send(address, 'brief', null);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const tokens: string[] = [];
    const reading = read(user.stream<string>(address, 'relay', {}, { timeoutMs: 60_000 }), tokens);
    await firstToken.wait;
    await vi.advanceTimersByTimeAsync(60_000);

    expect((await reading)?.code).toBe('DEADLINE_EXCEEDED'); // (tokens not read by then are dropped: the call is over)
    expect((await atOrchestrator[1]!.aborted).code).toBe('DEADLINE_EXCEEDED');
    expect((await atModel[1]!.aborted).code).toBe('DEADLINE_EXCEEDED');
    await atModel[1]!.ended; // the model's generator ran its finally: it stopped
  });

  it("the user's cancel reaches the model with its reason; leaving the for await does too", async () => {
    const { user, address, atModel, atOrchestrator, firstToken } = await chain(channel);
    const tokens: string[] = [];
    const controller = new AbortController();
    const reading = read(user.stream<string>(address, 'relay', {}, { signal: controller.signal }), tokens);
    await firstToken.wait;
    controller.abort(new AgentError('CANCELLED', 'the user closed the tab'));
    expect(await reading).toMatchObject({ code: 'CANCELLED', message: 'the user closed the tab' });
    expect(await atOrchestrator[0]!.aborted).toMatchObject({ code: 'CANCELLED', message: 'the user closed the tab' });
    expect(await atModel[0]!.aborted).toMatchObject({ code: 'CANCELLED', message: 'the user closed the tab' });
    await atModel[0]!.ended;

    for await (const token of user.stream<string>(address, 'relay', {})) {
      expect(token).toBe('HELLO');
      break;
    }
    expect((await atOrchestrator[1]!.aborted).code).toBe('CANCELLED');
    expect((await atModel[1]!.aborted).code).toBe('CANCELLED');
    await atModel[1]!.ended;
  });

  it("the model's errors reach the user through the orchestrator, with their code and text", async () => {
    const { user, address } = await chain(channel);
    const tokens: string[] = [];
    expect(await read(user.stream<string>(address, 'relay', { fail: 'typed' }), tokens)).toMatchObject({ code: 'RESOURCE_EXHAUSTED', message: 'model quota used up' });
    expect(tokens).toEqual(['HELLO', 'WORLD']);
    tokens.length = 0;
    expect(await read(user.stream<string>(address, 'relay', { fail: 'plain' }), tokens)).toMatchObject({ code: 'HANDLER_ERROR', message: 'model exploded' });
    expect(tokens).toEqual(['HELLO', 'WORLD']);
  });
});
