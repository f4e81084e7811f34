/**
 * What one call costs in CPU, measured where a noisy machine cannot blur it: caller and handler share one
 * process and one event loop, so a sequential call's cost is all the work both sides do for it (and the kernel's
 * loopback), with nothing overlapping. Each agentlink channel is compared with its own raw transport doing a
 * 1 KB echo: node:http2, `ws` over TLS, the QUIC engine alone (see raw-echoes.ts); and node:http2 in the shape
 * of an agentlink call (see http2-shapes.ts). On ws also the floor of any RPC over the same socket: a hand-written
 * RPC with ids, method names and deadlines, in msgpack or in bytes laid out by hand (msgpack-rpc-ws.ts), divided by
 * raw ws like agentlink ws, and agentlink ws divided by each.
 *
 * Measured as CPU time (process.cpuUsage: every thread, the QUIC engine's and V8's helpers included) per call,
 * and wall time per call. Subjects take turns: every round runs each one for `--calls` calls (the first subject
 * changes each round), so a slow spell of a shared machine lands on all of them; × raw is the median of the
 * rounds' ratios, with their range.
 * Usage (measures the built packages): pnpm build && pnpm --filter @agentlink/benchmarks call-cost
 *   [--rounds 9] [--calls 4000] [--only <subject name part>[,<part>…]] (--only: some subjects, e.g. one for `node --cpu-prof`)
 */
import { parseArgs } from 'node:util';
import { createAgent, type Transport } from '@agentlink/core';
import { http2 } from '@agentlink/http2';
import { loadNative, quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';
import { SHAPE_PAYLOAD, serveShapes, shapeClient } from './http2-shapes.js';
import { measure } from './cpu-per-call.js';
import { median } from './median.js';
import { binaryRpcWs, msgpackRpcWs } from './msgpack-rpc-ws.js';
import { rawQuicEcho, rawWsEcho, type Echo } from './raw-echoes.js';

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '9' }, calls: { type: 'string', default: '4000' }, only: { type: 'string' } } });
const ROUNDS = Number(args.rounds);
const CALLS = Number(args.calls);
const payload = SHAPE_PAYLOAD;

type Factory = (options?: { port: number; host: string }) => Transport;

async function agentlinkCalls(transport: Factory): Promise<Echo> {
  const server = await createAgent({ channels: [transport({ port: 0, host: '127.0.0.1' })] });
  server.handle('echo', (body: unknown) => body);
  const client = await createAgent({ channels: [transport()] });
  const address = server.addresses[0]!;
  await client.ping(address);
  return {
    call: async () => void (await client.send(address, 'echo', payload)),
    close: async () => void (await Promise.all([client.close(), server.close()])),
  };
}

interface Subject {
  name: string;
  /** The subject whose figure this one is divided by, per round. */
  raw?: string;
  echo: Echo;
  cpuUs: number[];
  wallUs: number[];
}

const native = loadNative();
const shapes = await serveShapes();
const node = await shapeClient(shapes.port);
const all: Array<{ name: string; raw?: string; open: () => Promise<Echo> }> = [
  { name: 'node:http2 echo', open: async () => ({ call: node.echo, close: async () => undefined }) },
  { name: "node:http2 in an agentlink call's shape", raw: 'node:http2 echo', open: async () => ({ call: node.callShape, close: async () => undefined }) },
  { name: 'agentlink http2', raw: 'node:http2 echo', open: () => agentlinkCalls(http2) },
  { name: 'raw ws (TLS)', open: () => rawWsEcho(payload) },
  // The floor of any RPC over the same socket (ids, method names, deadlines, msgpack): see msgpack-rpc-ws.ts.
  { name: 'msgpack-RPC over ws', raw: 'raw ws (TLS)', open: () => msgpackRpcWs(payload) },
  { name: 'binary RPC over ws', raw: 'raw ws (TLS)', open: () => binaryRpcWs(payload) },
  { name: 'agentlink ws', raw: 'raw ws (TLS)', open: () => agentlinkCalls(webSocket) },
  ...(native.ok
    ? [
        { name: 'raw QUIC engine', open: () => rawQuicEcho(native.binding, payload) },
        { name: 'agentlink quic', raw: 'raw QUIC engine', open: () => agentlinkCalls(quic as Factory) },
      ]
    : []),
];
// `--only 'raw QUIC,agentlink quic'`: the subjects whose names contain any of the comma-separated parts.
const parts = args.only?.split(',').map((part) => part.trim()).filter(Boolean);
const chosen = parts ? all.filter((s) => parts.some((part) => s.name.includes(part))) : all;
const subjects: Subject[] = [];
for (const s of chosen) subjects.push({ name: s.name, raw: s.raw, echo: await s.open(), cpuUs: [], wallUs: [] });

for (const subject of subjects) await measure(subject.echo.call, CALLS); // warm-up: JIT tiers, pools, buffers
for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < subjects.length; i++) {
    const subject = subjects[(round + i) % subjects.length]!;
    const { cpuUs, wallUs } = await measure(subject.echo.call, CALLS);
    subject.cpuUs.push(cpuUs);
    subject.wallUs.push(wallUs);
  }
}

const byName = new Map(subjects.map((s) => [s.name, s]));
const range = (values: number[], digits: number): string => `${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)}`;
const ratios = (subject: Subject, of: 'cpuUs' | 'wallUs'): number[] | undefined => {
  const raw = subject.raw ? byName.get(subject.raw) : undefined;
  return raw && subject[of].map((value, round) => value / raw[of][round]!);
};
console.log(`node ${process.version}: 1 KB each way, caller and handler in one process; ${ROUNDS} interleaved rounds of ${CALLS.toLocaleString('en')} calls per subject; median (range)`);
console.log('| subject | CPU µs per call | × raw (CPU) | wall µs per call | × raw (wall) |\n|---|---|---|---|---|');
for (const subject of subjects) {
  const cpuRatios = ratios(subject, 'cpuUs');
  const wallRatios = ratios(subject, 'wallUs');
  const cell = (values: number[] | undefined): string => (values ? `${median(values).toFixed(2)} (${range(values, 2)})` : '');
  console.log(
    `| ${subject.name} | ${median(subject.cpuUs).toFixed(1)} (${range(subject.cpuUs, 1)}) | ${cell(cpuRatios)} | ${median(subject.wallUs).toFixed(1)} (${range(subject.wallUs, 1)}) | ${cell(wallRatios)} |`,
  );
}
// agentlink ws against the floors of any RPC over the same socket, round by round, when they ran.
const agentlinkWs = byName.get('agentlink ws');
for (const floor of [byName.get('msgpack-RPC over ws'), byName.get('binary RPC over ws')]) {
  if (!floor || !agentlinkWs) continue;
  const over = agentlinkWs.cpuUs.map((value, round) => value / floor.cpuUs[round]!);
  console.log(`agentlink ws × ${floor.name} (CPU): ${median(over).toFixed(2)} (${range(over, 2)})`);
}
for (const subject of subjects) await subject.echo.close();
node.close();
shapes.close();
process.exit(0);
