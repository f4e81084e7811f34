// Two agents stream tokens over QUIC with whichever engine the loader picks for this process, and print what
// ran where, as one JSON line; exit 1 when a token is missing or out of order. Plain JavaScript on the built
// packages (dist/), so it runs on any Node, also one for another CPU under qemu (scripts/smoke-arm64.sh).
//   node packages/quic/scripts/smoke-stream.mjs [tokens=200]
import { createAgent } from '@agentlink/core';
import { loadNative, platformTarget, quic } from '../dist/index.js';

const count = Number(process.argv[2] ?? 200);
const engine = loadNative();
if (!engine.ok) {
  console.error(engine.reason);
  process.exit(1);
}
const server = await createAgent({ channels: [quic({ port: 0, required: true })] });
server.handleStream('generate', async function* ({ n }) {
  for (let i = 0; i < n; i++) yield `token-${i}`;
});
const address = server.addresses[0];
const client = await createAgent({ channels: [quic({ required: true })] });
const received = [];
try {
  for await (const token of client.stream(address, 'generate', { n: count }, { timeoutMs: 60_000 })) received.push(token);
} finally {
  await client.close();
  await server.close();
}
const inOrder = received.length === count && received.every((token, i) => token === `token-${i}`);
console.log(
  JSON.stringify({
    node: process.version,
    arch: process.arch,
    target: platformTarget(),
    engine: engine.from,
    engineVersion: engine.binding.engineVersion(),
    address: address.split('@')[1],
    tokens: received.length,
    inOrder,
  }),
);
process.exit(inOrder ? 0 : 1);
