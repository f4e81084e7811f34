// The CommonJS app: the packages are ESM only, so it loads them with import() (kept by module: node16).
async function main(): Promise<void> {
  const { AgentError, createAgent } = await import('@agentlink/core');
  const { webSocket } = await import('@agentlink/ws');
  const { http2 } = await import('@agentlink/http2');
  const { loadNative, quic } = await import('@agentlink/quic');
  // The SPI's Transport type, named without a type import (which would need a resolution-mode attribute here).
  type Transport = ReturnType<typeof webSocket>;
  const TOKENS = ['tokens', 'from', 'a', 'commonjs', 'app'];

  async function streamOver(name: string, make: (listen: boolean) => Transport): Promise<void> {
    const server = await createAgent({ channels: [make(true)] });
    server.handleStream('generate', async function* ({ words }: { words: string[] }) {
      for (const word of words) yield word;
    });
    const client = await createAgent({ channels: [make(false)] });
    try {
      const received: string[] = [];
      for await (const token of client.stream<string>(server.addresses[0]!, 'generate', { words: TOKENS }, { timeoutMs: 10_000 })) received.push(token);
      if (received.join(' ') !== TOKENS.join(' ')) throw new Error(`${name}: received ${JSON.stringify(received)}`);
      const missing = await client.send(server.addresses[0]!, 'missing', {}).catch((error: unknown) => error);
      if (!(missing instanceof AgentError) || missing.code !== 'NO_HANDLER') throw new Error(`${name}: expected NO_HANDLER, got ${String(missing)}`);
      console.log(`${name}: ${received.length} tokens streamed (CommonJS via import())`);
    } finally {
      await Promise.all([client.close(), server.close()]);
    }
  }

  await streamOver('ws', (listen) => webSocket(listen ? { port: 0, host: '127.0.0.1' } : {}));
  await streamOver('http2', (listen) => http2(listen ? { port: 0, host: '127.0.0.1' } : {}));
  if (process.env.EXPECT_QUIC === '1') {
    if (!loadNative().ok) throw new Error('quic: the engine package was published but did not load');
    await streamOver('quic', (listen) => quic(listen ? { port: 0, host: '127.0.0.1' } : {}));
  } else {
    console.log('quic: not run (no engine package for this platform was published)');
  }
}
main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
