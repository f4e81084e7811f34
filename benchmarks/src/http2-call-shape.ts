/**
 * The floor under @agentlink/http2's round trip, as a ladder measured in one run: node:http2's echo (agentbench's
 * baseline), node:http2 in the shape of an agentlink call, that shape carrying agentlink's frames (msgpack alone,
 * then msgpack with core's zod-checked decoding), and a real agentlink http2 call. Each rung adds one layer, so the
 * differences price node's shape, the mandated wire format and the SDK itself (see http2-shapes.ts). The servers
 * run in a second process; rounds are interleaved, rotating which subject goes first, so drift hits all alike.
 * Usage (measures the built packages): pnpm build && pnpm --filter @agentlink/benchmarks http2-call-shape [--rounds n]
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { createAgent } from '@agentlink/core';
import { http2 } from '@agentlink/http2';
import { median } from './median.js';
import { SHAPE_PAYLOAD, serveShapes, shapeClient } from './http2-shapes.js';

const CALLS_PER_ROUND = 3000;

if (process.argv[2] === 'serve') {
  const shapes = await serveShapes();
  const agent = await createAgent({ channels: [http2({ port: 0, host: '127.0.0.1' })] });
  agent.handle('echo', (body: unknown) => body);
  process.send!({ port: shapes.port, agent: agent.addresses[0] });
  process.on('disconnect', () => process.exit(0));
} else {
  const roundsFlag = process.argv.indexOf('--rounds');
  const rounds = roundsFlag > 0 ? Number(process.argv[roundsFlag + 1]) : 9;
  const child = fork(new URL(import.meta.url).pathname, ['serve'], { execArgv: process.execArgv });
  const [served] = (await once(child, 'message')) as [{ port: number; agent: string }];
  const client = await shapeClient(served.port);
  const agent = await createAgent({ channels: [http2()] });
  await agent.ping(served.agent);
  const subjects: Array<[string, () => Promise<unknown>]> = [
    ['raw echo', client.echo],
    ['call shape', client.callShape],
    ['call shape + options', client.callShapeWithOptions],
    ['call shape + msgpack frames', client.callShapeWithMsgpack],
    ['call shape + msgpack frames + zod', client.callShapeWithCodec],
    ['agentlink http2', () => agent.send(served.agent, 'echo', SHAPE_PAYLOAD)],
  ];
  const ratios: number[][] = subjects.map(() => []);
  const p50s: number[][] = subjects.map(() => []);
  for (let round = 0; round <= rounds; round++) {
    const roundP50 = new Array<number>(subjects.length);
    for (let k = 0; k < subjects.length; k++) {
      const index = (round + k) % subjects.length;
      const call = subjects[index]![1];
      const samples: number[] = [];
      for (let i = 0; i < CALLS_PER_ROUND; i++) {
        const t0 = performance.now();
        await call();
        samples.push(performance.now() - t0);
      }
      roundP50[index] = median(samples);
    }
    if (round === 0) continue; // warms both processes up
    for (let index = 0; index < subjects.length; index++) {
      p50s[index]!.push(roundP50[index]!);
      ratios[index]!.push(roundP50[index]! / roundP50[0]!);
    }
  }
  console.log(`node ${process.version}, 1 KB each way; ${rounds} interleaved rounds of ${CALLS_PER_ROUND.toLocaleString('en')} calls per subject`);
  console.log('| subject | p50 µs | × raw echo (median of the rounds\' ratios) |\n|---|---|---|');
  subjects.forEach(([name], index) => {
    console.log(`| ${name} | ${(median(p50s[index]!) * 1000).toFixed(1)} | ${median(ratios[index]!).toFixed(2)} |`);
  });
  client.close();
  await agent.close();
  child.disconnect();
}
