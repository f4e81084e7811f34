import type { ListenContext } from '../src/transport.js';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentError, createAgent, fromReadableStream, toReadableStream, type Agent } from '../src/index.js';
import { memoryTransport } from './memory-transport.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

async function pair() {
  const network = new Map<string, ListenContext>();
  const server = await createAgent({ channels: [memoryTransport(network, 'server')] });
  const client = await createAgent({ channels: [memoryTransport(network)] });
  agents.push(server, client);
  return { server, client, address: server.addresses[0]! };
}

/** Resolves with the reason the handler's signal aborted with. */
function abortedWith(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));
}

describe('web streams', () => {
  it('toReadableStream reads a remote stream to its end', async () => {
    const { server, client, address } = await pair();
    server.handleStream('count', async function* (n: number) {
      for (let i = 0; i < n; i++) yield i;
    });
    const seen: number[] = [];
    const reader = toReadableStream(client.stream<number>(address, 'count', 5)).getReader();
    for (let next = await reader.read(); !next.done; next = await reader.read()) seen.push(next.value);
    expect(seen).toEqual([0, 1, 2, 3, 4]);
  });

  it("cancelling the readable stream cancels the call: the handler's signal carries the reason text", async () => {
    const { server, client, address } = await pair();
    let handlerSignal: Promise<unknown> | undefined;
    server.handleStream('forever', async function* (_: unknown, ctx) {
      handlerSignal = abortedWith(ctx.signal);
      yield 'first';
      await new Promise(() => undefined); // waits until cancelled
    });
    const controller = new AbortController();
    const reader = toReadableStream(client.stream<string>(address, 'forever', null, { signal: controller.signal }), { controller }).getReader();
    expect((await reader.read()).value).toBe('first');
    const pending = reader.read();
    await reader.cancel('the browser tab closed');
    expect(await pending).toEqual({ done: true, value: undefined });
    expect(await handlerSignal).toMatchObject({ code: 'CANCELLED', message: 'the browser tab closed' });
  });

  it('cancelling a duplex call read as a web stream aborts it with the reason text', async () => {
    const { server, client, address } = await pair();
    let handlerSignal: Promise<unknown> | undefined;
    server.handleDuplex('echo', async function* (incoming, ctx) {
      handlerSignal = abortedWith(ctx.signal);
      for await (const item of incoming) yield item;
    });
    const call = client.duplex<string, string>(address, 'echo');
    const reader = toReadableStream(call).getReader();
    await call.send('a');
    expect((await reader.read()).value).toBe('a');
    await reader.cancel(new Error('user hit stop'));
    expect(await handlerSignal).toMatchObject({ code: 'CANCELLED', message: 'user hit stop' });
  });

  it("fromReadableStream feeds a handler; the caller's cancel cancels the source stream with the call's reason", async () => {
    const { server, client, address } = await pair();
    let cancelledWith: unknown;
    const sourceCancelled = new Promise<void>((resolve) => {
      server.handleStream('words', async function* (_: unknown, ctx) {
        let i = 0;
        const source = new ReadableStream<string>({
          pull: (controller) => controller.enqueue(`word-${i++}`),
          cancel: (reason) => {
            cancelledWith = reason;
            resolve();
          },
        });
        yield* fromReadableStream(source, ctx.signal);
      });
    });
    const words: string[] = [];
    for await (const word of client.stream<string>(address, 'words')) {
      words.push(word);
      if (words.length === 3) break;
    }
    await sourceCancelled;
    expect(words).toEqual(['word-0', 'word-1', 'word-2']);
    expect(cancelledWith).toBeInstanceOf(AgentError);
    expect((cancelledWith as AgentError).code).toBe('CANCELLED');
  });
});
