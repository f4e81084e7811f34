import { setTimeout as sleep } from 'node:timers/promises';
import { AgentError, createAgent, type Agent } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import { http2, type Http2Channel } from '../src/index.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

async function pair(serverOptions: Parameters<typeof http2>[0] = { port: 0 }) {
  const server = await createAgent({ channels: [http2(serverOptions)] });
  const client = await createAgent({ channels: [http2()] });
  agents.push(server, client);
  server.handle('slow', async (ms: number) => {
    await sleep(ms);
    return ms;
  });
  return { server, client, address: server.addresses[0]! };
}

describe('HTTP/2 channel specifics', () => {
  it('a GOAWAY during 100 in-flight calls loses none: each completes or fails retryably; new calls use a new session', async () => {
    const { server, client, address } = await pair();
    await client.send(address, 'slow', 0);
    const [first] = client.channels(server.id);
    // Calls keep starting while the server sends GOAWAY, so some race it on the old session.
    const calls: Array<Promise<{ ok: true; value: number } | { ok: false; error: unknown }>> = [];
    let drained: Promise<void> | undefined;
    for (let i = 0; i < 100; i++) {
      calls.push(
        client.send<number>(address, 'slow', 50 + (i % 10)).then(
          (value) => ({ ok: true as const, value }),
          (error: unknown) => ({ ok: false as const, error }),
        ),
      );
      if (i === 50) drained = (server.channels(client.id)[0] as Http2Channel).drain();
      if (i % 10 === 0) await sleep(1);
    }
    const outcomes = await Promise.all(calls);
    await drained;
    const completed = outcomes.filter((o) => o.ok).length;
    for (const outcome of outcomes) {
      if (outcome.ok) continue;
      expect(outcome.error).toBeInstanceOf(AgentError);
      expect((outcome.error as AgentError).retryable).toBe(true);
    }
    expect(completed).toBeGreaterThan(0);
    expect(await client.send(address, 'slow', 1)).toBe(1);
    expect(client.channels(server.id).some((c) => c !== first)).toBe(true);
  });

  it('200 concurrent calls to a server allowing 50 streams all complete (queued, not refused)', async () => {
    const { client, address } = await pair({ port: 0, maxConcurrentStreams: 50 });
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => client.send<number>(address, 'slow', 10 + (i % 5))));
    expect(results).toEqual(Array.from({ length: 200 }, (_, i) => 10 + (i % 5)));
  });

  it('speaks h2 over TLS 1.3 only: an HTTP/1.1 client or plaintext h2 is refused without harm', async () => {
    const { client, address } = await pair();
    const { hostname, port } = new URL(address.split('@')[1]!);
    const { request } = await import('node:https');
    const refused = await new Promise<string>((resolve) => {
      const req = request({ host: hostname, port, path: '/agentlink', rejectUnauthorized: false }, () => resolve('answered'));
      req.on('error', (error) => resolve(error.message));
      req.end();
    });
    expect(refused).not.toBe('answered');
    expect(await client.send(address, 'slow', 1)).toBe(1);
  });

  it('bodies larger than a write slice, many at once over a small session budget, arrive whole and in order', async () => {
    // 128 KiB of unsent bytes per session on both sides: most writes wait for the budget, and 3 MiB bodies go in slices.
    const server = await createAgent({ channels: [http2({ port: 0, maxSessionBuffered: 128 * 1024 })] });
    const client = await createAgent({ channels: [http2({ maxSessionBuffered: 128 * 1024 })] });
    agents.push(server, client);
    server.handle('echo', (body: Uint8Array) => body);
    const bodies = Array.from({ length: 20 }, (_, i) => Buffer.alloc(i % 4 === 0 ? 3 * 1024 * 1024 : 300 * 1024 + i).map((_, j) => (j * 31 + i) & 0xff));
    const replies = await Promise.all(bodies.map((body) => client.send<Uint8Array>(server.addresses[0]!, 'echo', body)));
    replies.forEach((reply, i) => expect(Buffer.from(reply).equals(bodies[i]!)).toBe(true));
    const [channel] = client.channels(server.id) as Http2Channel[];
    expect(channel!.outbound.bytes).toBe(0); // every byte handed to node was sent and given back
  });
  it('the server builds its side of the reverse stream only when it first calls the client back, and the call back works', async () => {
    const { server, client, address } = await pair();
    client.handle('echo', (text: string) => text);
    await client.send(address, 'slow', 0);
    const [serving] = server.channels(client.id) as Http2Channel[];
    // Most clients are never called back: the server keeps their reverse stream bare (docs/benchmarks.md, memory per idle peer).
    const reverseOf = (channel: Http2Channel): unknown => (channel as unknown as { reverse?: unknown }).reverse;
    expect(reverseOf(serving!)).toBeUndefined();
    // Nor does it hold a promise for the reverse stream: that is made only when a call back has to wait for it.
    expect((serving as unknown as { reverseReady?: unknown }).reverseReady).toBeUndefined();
    expect(await server.send(client.id, 'echo', 'back')).toBe('back');
    expect(reverseOf(serving!)).toBeDefined();
    expect(server.channels(client.id)).toEqual([serving]);
  });
});
