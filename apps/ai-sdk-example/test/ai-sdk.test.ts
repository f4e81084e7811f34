import { createAgent, toReadableStream, type Agent } from '@agentlink/core';
import { webSocket } from '@agentlink/ws';
import { simulateReadableStream } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { afterEach, describe, expect, it } from 'vitest';
import { mockModel, serveText } from '../src/index.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

async function pair(): Promise<{ server: Agent; caller: Agent; address: string }> {
  const server = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
  const caller = await createAgent({ channels: [webSocket()] });
  agents.push(server, caller);
  return { server, caller, address: server.addresses[0]! };
}

describe('the AI SDK over agentlink', () => {
  it("streamText's tokens reach a remote agent's for await, in order", async () => {
    const { server, caller, address } = await pair();
    const tokens = ['Hello', ', ', 'remote', ' agent', '!'];
    const model = mockModel(tokens);
    serveText(server, model);
    const received: string[] = [];
    for await (const token of caller.stream<string>(address, 'generate', { prompt: 'greet' })) received.push(token);
    expect(received).toEqual(tokens);
    expect(model.doStreamCalls).toHaveLength(1);
    expect(JSON.stringify(model.doStreamCalls[0]!.prompt)).toContain('greet');
  });

  it('as a web ReadableStream on the caller side: cancelling it aborts the model call upstream', async () => {
    const { server, caller, address } = await pair();
    let modelSignal: AbortSignal | undefined;
    let upstreamCancelled!: () => void;
    const cancelled = new Promise<void>((resolve) => (upstreamCancelled = resolve));
    // A model that produces one token, then waits: only a cancel ends it.
    const model = new MockLanguageModelV3({
      doStream: async (options) => {
        modelSignal = options.abortSignal;
        options.abortSignal?.addEventListener('abort', () => upstreamCancelled(), { once: true });
        const first = simulateReadableStream({ chunks: [{ type: 'text-start' as const, id: 't' }, { type: 'text-delta' as const, id: 't', delta: 'thinking' }] });
        const reader = first.getReader();
        return {
          stream: new ReadableStream({
            async pull(controller) {
              const next = await reader.read();
              if (!next.done) controller.enqueue(next.value);
              // after the first token: never enqueue again, never close
            },
          }),
        };
      },
    });
    serveText(server, model);
    const controller = new AbortController();
    const tokens = toReadableStream(caller.stream<string>(address, 'generate', { prompt: 'think' }, { signal: controller.signal }), { controller });
    const reader = tokens.getReader();
    expect((await reader.read()).value).toBe('thinking');
    await reader.cancel('the user closed the chat');
    await cancelled;
    expect(modelSignal?.aborted).toBe(true);
    expect((modelSignal?.reason as Error).message).toBe('the user closed the chat');
  });
});
