import { createAgent, type Agent } from '@agentlink/core';
import { afterEach, expect, it } from 'vitest';
import { loadNative, quic } from '../src/index.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

async function agent(): Promise<Agent> {
  const a = await createAgent({ channels: [quic({ port: 0 })] });
  a.handle('echo', (body: unknown) => body);
  a.handleStream('tokens', async function* (count: number) {
    const token = Buffer.alloc(16, 7);
    for (let i = 0; i < count; i++) yield token; // a burst: the producer never waits
  });
  agents.push(a);
  return a;
}

function yields(): number {
  const native = loadNative();
  if (!native.ok) throw new Error(native.reason);
  return native.binding.firstWriteYields();
}

// The engine's thread sends a write's bytes; a producer that keeps its core for a whole burst kept them from
// leaving (docs/quic.md, "A burst's first token between two processes"). After a stream's first bytes are taken,
// the writing thread gives its core away once: for the caller's streamed request and the handler's first token,
// not for the burst's later writes, and not for a unary call (its request and reply are each a stream's last write).
it("gives up the core once after each stream's first bytes: a streamed call's request and its first token, never the burst's later writes or a unary call", async () => {
  const server = await agent();
  const client = await agent();
  const address = server.addresses[0]!;
  expect(await client.send(address, 'echo', 'warm')).toBe('warm');

  const beforeUnary = yields();
  for (let i = 0; i < 5; i++) expect(await client.send(address, 'echo', i)).toBe(i);
  expect(yields() - beforeUnary).toBe(0);

  const beforeBurst = yields();
  let received = 0;
  for await (const token of client.stream<Uint8Array>(address, 'tokens', 1000)) {
    expect(token.length).toBe(16);
    received++;
  }
  expect(received).toBe(1000);
  expect(yields() - beforeBurst).toBe(2); // the request's stream (caller) and the reply's first token (handler)

  const beforeTwo = yields();
  for (let i = 0; i < 2; i++) for await (const _ of client.stream<Uint8Array>(address, 'tokens', 50)) void _;
  expect(yields() - beforeTwo).toBe(4);
});
