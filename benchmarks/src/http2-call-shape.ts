/**
 * The floor under @agentlink/http2's round trip: what node:http2 itself costs for the shape of an agentlink call,
 * before agentlink encodes, validates or dispatches a byte (the shapes are described in http2-shapes.ts). Three
 * subjects against one node:http2 TLS 1.3 server in a second process, rounds interleaved so machine drift hits
 * all alike: the echo (agentbench's baseline), the call shape, and the call shape with an options object passed
 * to request(), which agentlink did until node's request() was measured slower with any.
 * Usage: pnpm --filter @agentlink/benchmarks http2-call-shape
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { median } from './median.js';
import { serveShapes, shapeClient } from './http2-shapes.js';

if (process.argv[2] === 'serve') {
  const { port } = await serveShapes();
  process.send!(port);
  process.on('disconnect', () => process.exit(0));
} else {
  const child = fork(new URL(import.meta.url).pathname, ['serve'], { execArgv: process.execArgv });
  const [port] = (await once(child, 'message')) as [number];
  const client = await shapeClient(port);
  const subjects: Record<string, () => Promise<void>> = {
    'raw echo': client.echo,
    'call shape': client.callShape,
    'call shape + options': client.callShapeWithOptions,
  };
  const p50s: Record<string, number[]> = Object.fromEntries(Object.keys(subjects).map((name) => [name, []]));
  const rounds = 9;
  for (let round = 0; round < rounds; round++) {
    for (const [name, call] of Object.entries(subjects)) {
      const samples: number[] = [];
      for (let i = 0; i < 3000; i++) {
        const t0 = performance.now();
        await call();
        samples.push(performance.now() - t0);
      }
      samples.sort((a, b) => a - b);
      if (round > 0) p50s[name]!.push(samples[samples.length >> 1]!); // round 0 warms up
    }
  }
  const base = median(p50s['raw echo']!);
  console.log(`node ${process.version}, 1 KB each way, median of ${rounds - 1} interleaved rounds of 3,000 calls`);
  console.log('| subject | p50 µs | × raw echo |\n|---|---|---|');
  for (const name of Object.keys(subjects)) {
    const p50 = median(p50s[name]!);
    console.log(`| ${name} | ${(p50 * 1000).toFixed(1)} | ${(p50 / base).toFixed(2)} |`);
  }
  client.close();
  child.disconnect();
}
