import { AgentError, createAgent, type Agent } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import { quic } from '../src/index.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

/**
 * A call past the peer's stream limit waits in the engine for the peer to grant another stream (QUIC MAX_STREAMS):
 * a peer that allows few at once and holds them (a handler that never answers, or a hostile peer that never grants
 * more) must not keep that call past its deadline or its caller's abort.
 */
describe('a QUIC call waiting for stream credit', () => {
  it.each([
    ['signal', 'CANCELLED'],
    ['deadline', 'DEADLINE_EXCEEDED'],
  ] as const)('ends by its %s while the peer grants no stream', async (how, code) => {
    const server = await createAgent({ channels: [quic({ port: 0, maxStreams: 1 })] });
    agents.push(server);
    let holding: () => void;
    const held = new Promise<void>((resolve) => (holding = resolve));
    let release!: () => void;
    const released = new Promise<string>((resolve) => (release = () => resolve('released')));
    server.handle('hold', () => {
      holding();
      return released; // answers only when told: its stream stays open until then
    });
    server.handle('echo', (body: unknown) => body);
    const client = await createAgent({ channels: [quic()] });
    agents.push(client);
    const first = client.send(server.addresses[0]!, 'hold', null, { timeoutMs: 60_000 });
    await held;
    const stop = new AbortController();
    const waiting = client.send(server.addresses[0]!, 'hold', null, how === 'signal' ? { signal: stop.signal, timeoutMs: 60_000 } : { timeoutMs: 200 });
    stop.abort();
    const outcome = await waiting.catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(AgentError);
    expect(outcome).toMatchObject({ code });
    // The channel is not lost with the call that gave up: the held call ends, its stream's credit comes back (the
    // engine's late stream for the abandoned call is reset unused), and the next call takes it.
    const channel = client.channels()[0]!;
    release();
    expect(await first).toBe('released');
    expect(await client.send(server.addresses[0]!, 'echo', 'again', { timeoutMs: 10_000 })).toBe('again');
    expect(client.channels()).toEqual([channel]);
  });
});
