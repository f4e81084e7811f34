/**
 * The relay next to a direct QUIC channel between the same two agents, on loopback:
 *   pnpm build && pnpm --filter @agentlink/benchmarks relay
 * Both agents use the reach plugin with a local rendezvous; one pair may only go direct, the other only
 * through the relay (TLS end to end inside the relay's tunnel, over the control WebSockets).
 */
import { createAgent } from '@agentlink/core';
import { reach } from '@agentlink/nat';
import { quic } from '@agentlink/quic';
import { startRendezvous } from '@agentlink/rendezvous';
import { webSocket } from '@agentlink/ws';

const TOTAL_BYTES = 128 * 1024 * 1024;
const ITEM = 64 * 1024;

async function pair(rendezvous: string, paths: Array<'direct' | 'relay'>) {
  const make = async () => {
    const q = quic({ port: 0, host: '127.0.0.1' });
    return createAgent({ channels: [q, webSocket()], plugins: [reach({ rendezvous, quic: q, paths })] });
  };
  const server = await make();
  const payload = Buffer.alloc(ITEM, 7);
  server.handle('echo', (x: unknown) => x);
  server.handleStream('bulk', async function* (total: number) {
    for (let sent = 0; sent < total; sent += ITEM) yield payload;
  });
  const client = await make();
  return { server, client };
}

async function measure(label: string, rendezvous: string, paths: Array<'direct' | 'relay'>) {
  const { server, client } = await pair(rendezvous, paths);
  await client.send(server.id, 'echo', 'warm up');
  const path = await client.pathTo(server.id);
  const rtts: number[] = [];
  const kb = Buffer.alloc(1024, 1);
  for (let i = 0; i < 2000; i++) {
    const started = performance.now();
    await client.send(server.id, 'echo', kb);
    rtts.push(performance.now() - started);
  }
  rtts.sort((a, b) => a - b);
  const started = performance.now();
  let bytes = 0;
  for await (const item of client.stream<Uint8Array>(server.id, 'bulk', TOTAL_BYTES)) bytes += item.length;
  const seconds = (performance.now() - started) / 1000;
  await client.close();
  await server.close();
  return { label, path: `${path.path} (${path.kind})`, p50: rtts[1000]!, p99: rtts[1980]!, mbps: bytes / 1e6 / seconds };
}

const rendezvous = await startRendezvous({ host: '127.0.0.1', port: 0, stunPorts: [0, 0], httpPort: -1, relayBytesPerSecond: 1e12 });
const rows = [await measure('direct', rendezvous.address, ['direct']), await measure('relay', rendezvous.address, ['relay'])];
await rendezvous.close();
console.log(`Node ${process.version}; loopback; 2,000 × 1 KB echo, then ${TOTAL_BYTES / 1024 / 1024} MiB as 64 KiB stream items\n`);
console.log('| path | 1 KB RTT p50 / p99 ms | stream MB/s |');
console.log('|---|---|---|');
for (const r of rows) console.log(`| ${r.path} | ${r.p50.toFixed(3)} / ${r.p99.toFixed(3)} | ${r.mbps.toFixed(0)} |`);
console.log(`\nrelay / direct throughput: ${(rows[1]!.mbps / rows[0]!.mbps).toFixed(2)}×`);
