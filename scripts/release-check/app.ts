// The app every fresh install runs (ESM NodeNext and bundler resolution): two agents stream tokens over each
// channel the packages provide. QUIC runs when an engine package was published (EXPECT_QUIC=1), and must then work.
import { AgentError, createAgent, type Agent } from '@agentlink/core';
import type { Transport } from '@agentlink/core/transport';
import { http2 } from '@agentlink/http2';
import { loadNative, quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';

const TOKENS = ['tokens', 'streamed', 'between', 'two', 'agents'];

async function streamOver(name: string, make: (listen: boolean) => Transport): Promise<void> {
  const server: Agent = await createAgent({ channels: [make(true)] });
  server.handleStream('generate', async function* ({ words }: { words: string[] }) {
    for (const word of words) yield word;
  });
  const client = await createAgent({ channels: [make(false)] });
  try {
    const received: string[] = [];
    for await (const token of client.stream<string>(server.addresses[0]!, 'generate', { words: TOKENS }, { timeoutMs: 10_000 })) {
      received.push(token);
    }
    if (received.join(' ') !== TOKENS.join(' ')) throw new Error(`${name}: received ${JSON.stringify(received)}`);
    const missing = await client.send(server.addresses[0]!, 'missing', {}).catch((error: unknown) => error);
    if (!(missing instanceof AgentError) || missing.code !== 'NO_HANDLER') throw new Error(`${name}: expected an AgentError NO_HANDLER, got ${String(missing)}`);
    console.log(`${name}: ${received.length} tokens streamed, errors are AgentErrors`);
  } finally {
    await Promise.all([client.close(), server.close()]);
  }
}

await streamOver('ws', (listen) => webSocket(listen ? { port: 0, host: '127.0.0.1' } : {}));
await streamOver('http2', (listen) => http2(listen ? { port: 0, host: '127.0.0.1' } : {}));
const native = loadNative();
if (process.env.EXPECT_QUIC === '1') {
  if (!native.ok) throw new Error(`quic: the engine package was published but did not load`);
  await streamOver('quic', (listen) => quic(listen ? { port: 0, host: '127.0.0.1' } : {}));
} else {
  console.log(`quic: not run (no engine package for this platform was published; engine loaded: ${native.ok})`);
}
