/**
 * What starting a streamed call costs over a unary call, in CPU, where a noisy machine cannot blur it (as
 * call-cost: caller and handler in one process and one event loop, so each call's cost is all the work of both
 * sides and the kernel's loopback, nothing overlapping). Per channel: a unary call whose reply is a 16-byte token,
 * and a streamed call that yields one 16-byte token (its first item, then its end); on raw `ws` over TLS the same
 * two shapes as agentbench's raw subject serves them (an echoed binary message; a text request answered by one
 * binary message and "done"). Subjects take turns each round; prints CPU and wall µs per call, and per round the
 * streamed call's CPU over the unary one's.
 *
 *   pnpm build && pnpm --filter @agentlink/benchmarks stream-start-cost [--rounds 9] [--calls 3000] [--only ws]
 *     [--shapes unary,stream]
 */
import { once } from 'node:events';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { createAgent, Identity, type Transport } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import { http2 } from '@agentlink/http2';
import { webSocket } from '@agentlink/ws';
import { WebSocket, WebSocketServer } from 'ws';
import { measure } from './cpu-per-call.js';
import { median } from './median.js';

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '9' }, calls: { type: 'string', default: '3000' }, only: { type: 'string' }, shapes: { type: 'string', default: 'unary,stream' } } });
/** `--shapes stream`: one shape only (for `node --cpu-prof`, a profile of one shape). */
const SHAPES = args.shapes!.split(',') as Array<'unary' | 'stream'>;
const ROUNDS = Number(args.rounds);
const CALLS = Number(args.calls);
const token = Buffer.alloc(16, 7);

interface Pair {
  unary(): Promise<void>;
  stream(): Promise<void>;
  close(): Promise<void>;
}

async function agentlinkPair(transport: (options?: { port: number; host: string }) => Transport): Promise<Pair> {
  const server = await createAgent({ channels: [transport({ port: 0, host: '127.0.0.1' })] });
  server.handle('token', () => token);
  server.handleStream('tokens', async function* ({ count }: { count: number }) {
    for (let i = 0; i < count; i++) yield token;
  });
  const client = await createAgent({ channels: [transport()] });
  const address = server.addresses[0]!;
  await client.ping(address);
  const request = { count: 1 };
  return {
    async unary() {
      await client.send(address, 'token', request);
    },
    async stream() {
      for await (const _ of client.stream(address, 'tokens', request));
    },
    close: async () => void (await Promise.all([client.close(), server.close()])),
  };
}

async function rawWsPair(): Promise<Pair> {
  const tls = selfSignedCertificate(Identity.generate());
  const https = createServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3' });
  const wss = new WebSocketServer({ server: https, perMessageDeflate: false });
  wss.on('connection', (ws) =>
    ws.on('message', (data: Buffer, isBinary) => {
      if (isBinary) return ws.send(token);
      ws.send(token);
      ws.send('done');
    }),
  );
  await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
  const client = new WebSocket(`wss://127.0.0.1:${(https.address() as AddressInfo).port}`, { rejectUnauthorized: false, perMessageDeflate: false });
  await once(client, 'open');
  let onMessage: (isBinary: boolean) => void = () => undefined;
  client.on('message', (_data: Buffer, isBinary) => onMessage(isBinary));
  return {
    unary: () =>
      new Promise<void>((resolve) => {
        onMessage = () => resolve();
        client.send(token);
      }),
    stream: () =>
      new Promise<void>((resolve) => {
        onMessage = (isBinary) => {
          if (!isBinary) resolve();
        };
        client.send('download 16 16 0');
      }),
    async close() {
      client.terminate();
      for (const ws of wss.clients) ws.terminate();
      https.closeAllConnections();
      https.close();
    },
  };
}

const all: Array<{ name: string; open: () => Promise<Pair> }> = [
  { name: 'raw ws (TLS)', open: rawWsPair },
  { name: 'agentlink ws', open: () => agentlinkPair(webSocket) },
  { name: 'agentlink http2', open: () => agentlinkPair(http2) },
];
const parts = args.only?.split(',').map((part) => part.trim()).filter(Boolean);
const chosen = parts ? all.filter((s) => parts.some((part) => s.name.includes(part))) : all;
interface Subject {
  name: string;
  pair: Pair;
  figures: Record<'unary' | 'stream', { cpuUs: number[]; wallUs: number[] }>;
}
const subjects: Subject[] = [];
for (const s of chosen) subjects.push({ name: s.name, pair: await s.open(), figures: { unary: { cpuUs: [], wallUs: [] }, stream: { cpuUs: [], wallUs: [] } } });

for (const subject of subjects) {
  for (const shape of SHAPES) await measure(subject.pair[shape], CALLS); // warm-up
}
for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < subjects.length; i++) {
    const subject = subjects[(round + i) % subjects.length]!;
    for (const shape of round % 2 === 0 ? SHAPES : [...SHAPES].reverse()) {
      const { cpuUs, wallUs } = await measure(subject.pair[shape], CALLS);
      subject.figures[shape].cpuUs.push(cpuUs);
      subject.figures[shape].wallUs.push(wallUs);
    }
  }
}
const range = (values: number[]): string => `${Math.min(...values).toFixed(1)}–${Math.max(...values).toFixed(1)}`;
console.log(`node ${process.version}: caller and handler in one process; ${ROUNDS} interleaved rounds of ${CALLS.toLocaleString('en')} calls per shape; median (range)`);
console.log('| subject | unary CPU µs | streamed (1 item) CPU µs | streamed − unary, CPU µs | unary wall µs | streamed wall µs |\n|---|---|---|---|---|---|');
for (const { name, figures } of subjects) {
  const over = figures.stream.cpuUs.map((value, round) => value - (figures.unary.cpuUs[round] ?? Number.NaN));
  const cell = (values: number[]): string => (values.length > 0 ? `${median(values).toFixed(1)} (${range(values)})` : '');
  console.log(`| ${name} | ${cell(figures.unary.cpuUs)} | ${cell(figures.stream.cpuUs)} | ${cell(over)} | ${cell(figures.unary.wallUs)} | ${cell(figures.stream.wallUs)} |`);
}
for (const subject of subjects) await subject.pair.close();
process.exit(0);
