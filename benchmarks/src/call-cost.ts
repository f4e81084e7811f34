/**
 * What one call costs in CPU, measured where a noisy machine cannot blur it: caller and handler share one
 * process and one event loop, so the time of a sequential call is all the work both sides do for it (and the
 * kernel's loopback), with nothing overlapping. Compares each agentlink channel with node:http2 alone in two
 * shapes (see http2-call-shape.ts): a plain echo, and the shape of an agentlink call.
 * Usage (measures the built packages): pnpm build && pnpm --filter @agentlink/benchmarks call-cost
 */
import { once } from 'node:events';
import { connect, createSecureServer } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { createAgent, Identity, selfSignedCertificate, type Transport } from '@agentlink/core';
import { http2 } from '@agentlink/http2';
import { loadNative, quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';

const payload = Buffer.alloc(1024, 1);
const CALLS = 20_000;

async function nodeHttp2Calls(): Promise<{ echo: () => Promise<void>; callShape: () => Promise<void>; close(): void }> {
  const tls = selfSignedCertificate(Identity.generate());
  const server = createSecureServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3', settings: { initialWindowSize: 8 << 20 } });
  server.on('stream', (stream, headers) => {
    if (headers[':path'] === '/echo') {
      const parts: Buffer[] = [];
      stream.on('data', (d: Buffer) => parts.push(d));
      stream.on('end', () => {
        stream.respond({ ':status': 200 });
        stream.end(Buffer.concat(parts));
      });
      return;
    }
    let answered = false;
    stream.on('data', (d: Buffer) => {
      if (answered) return;
      answered = true;
      stream.respond({ ':status': 200, 'content-type': 'application/agentlink' });
      stream.end(d);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const session = connect(`https://127.0.0.1:${(server.address() as AddressInfo).port}`, { rejectUnauthorized: false, settings: { initialWindowSize: 8 << 20 } });
  await once(session, 'connect');
  const headers = { ':method': 'POST', ':path': '/call', 'content-type': 'application/agentlink' };
  return {
    echo: () =>
      new Promise((resolve, reject) => {
        const stream = session.request({ ':method': 'POST', ':path': '/echo' });
        stream.on('data', () => undefined);
        stream.on('end', resolve);
        stream.on('error', reject);
        stream.end(payload);
      }),
    callShape: () =>
      new Promise((resolve, reject) => {
        const stream = session.request(headers);
        stream.once('data', () => {
          resolve();
          stream.end();
        });
        stream.on('end', () => undefined);
        stream.on('error', reject);
        stream.write(payload);
      }),
    close() {
      session.destroy();
      server.close();
    },
  };
}

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
  return runs.sort((a, b) => a - b)[2]!;
}

const rows: Array<[string, number]> = [];
const node = await nodeHttp2Calls();
rows.push(['node:http2 echo (agentbench baseline)', await perCall(node.echo)]);
rows.push(["node:http2 in an agentlink call's shape", await perCall(node.callShape)]);
node.close();
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
