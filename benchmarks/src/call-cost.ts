/**
 * What one call costs in CPU, measured where a noisy machine cannot blur it: caller and handler share one
 * process and one event loop, so the time of a sequential call is all the work both sides do for it (and the
 * kernel's loopback), with nothing overlapping. Compares each agentlink channel with node:http2 alone in two
 * shapes (see http2-shapes.ts): a plain echo, and the shape of an agentlink call.
 * Usage (measures the built packages): pnpm build && pnpm --filter @agentlink/benchmarks call-cost
 */
import { createAgent, type Transport } from '@agentlink/core';
import { http2 } from '@agentlink/http2';
import { loadNative, quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';
import { SHAPE_PAYLOAD, serveShapes, shapeClient } from './http2-shapes.js';
import { median } from './median.js';

const payload = SHAPE_PAYLOAD;
const CALLS = 20_000;

async function agentlinkCalls(transport: (options?: { port: number; host: string }) => Transport) {
  const server = await createAgent({ channels: [transport({ port: 0, host: '127.0.0.1' })] });
  server.handle('echo', (body: unknown) => body);
  const client = await createAgent({ channels: [transport()] });
  const address = server.addresses[0]!;
  await client.ping(address);
  return {
    call: async () => void (await client.send(address, 'echo', payload)),
    close: () => Promise.all([client.close(), server.close()]),
  };
}

/** Median over 5 runs of CALLS sequential calls, after a warm-up: µs per call. */
async function perCall(call: () => Promise<void>): Promise<number> {
  for (let i = 0; i < 5000; i++) await call();
  const runs: number[] = [];
  for (let run = 0; run < 5; run++) {
    const started = performance.now();
    for (let i = 0; i < CALLS; i++) await call();
    runs.push(((performance.now() - started) * 1000) / CALLS);
  }
  return median(runs);
}

const rows: Array<[string, number]> = [];
const shapes = await serveShapes();
const node = await shapeClient(shapes.port);
rows.push(['node:http2 echo (agentbench baseline)', await perCall(node.echo)]);
rows.push(["node:http2 in an agentlink call's shape", await perCall(node.callShape)]);
node.close();
shapes.close();
const channels: Array<[string, (options?: { port: number; host: string }) => Transport]> = [
  ['agentlink http2', http2],
  ['agentlink ws', webSocket],
  ...(loadNative().ok ? ([['agentlink quic', quic]] as Array<[string, (options?: { port: number; host: string }) => Transport]>) : []),
];
for (const [name, transport] of channels) {
  const calls = await agentlinkCalls(transport);
  rows.push([name, await perCall(calls.call)]);
  await calls.close();
}
const base = rows[0]![1];
console.log(`node ${process.version}: 1 KB each way, caller and handler in one process; median of 5 × ${CALLS.toLocaleString('en')} calls`);
console.log('| subject | µs of work per call | × node:http2 echo |\n|---|---|---|');
for (const [name, us] of rows) console.log(`| ${name} | ${us.toFixed(1)} | ${(us / base).toFixed(2)} |`);
process.exit(0);
