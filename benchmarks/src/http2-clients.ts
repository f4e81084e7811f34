/**
 * Which HTTP/2 client should @agentlink/http2 use? node:http2 and undici (allowH2), measured in one run against
 * the same node:http2 server over TLS 1.3: 1 KB request/response latency, bulk download, and whether one stream
 * can carry request and response bodies at the same time (agentlink calls need full duplex).
 * Usage: pnpm --filter @agentlink/benchmarks http2-clients
 */
import { connect, createSecureServer } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Identity } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import { Client } from 'undici';

const tls = selfSignedCertificate(Identity.generate());
const server = createSecureServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3', settings: { initialWindowSize: 8 << 20 } });
server.on('stream', (stream, headers) => {
  const url = new URL(headers[':path'] ?? '/', 'https://x');
  stream.respond({ ':status': 200 });
  if (url.pathname === '/echo') stream.pipe(stream); // echoes each chunk as it arrives: full duplex
  else {
    const chunk = Buffer.alloc(64 * 1024, 7);
    let left = Number(url.searchParams.get('total'));
    const pump = (): void => {
      while (left > 0) {
        left -= chunk.length;
        if (!stream.write(chunk)) return void stream.once('drain', pump);
      }
      stream.end();
    };
    pump();
  }
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const origin = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;

const payload = Buffer.alloc(1024, 1);
const percentile = (samples: number[], q: number): number => [...samples].sort((a, b) => a - b)[Math.floor(q * (samples.length - 1))]!;

async function measure(name: string, echo: () => Promise<number>, download: (total: number) => Promise<number>, duplex: () => Promise<boolean>) {
  for (let i = 0; i < 300; i++) await echo();
  const samples: number[] = [];
  for (let i = 0; i < 3000; i++) {
    const t0 = performance.now();
    if ((await echo()) !== payload.length) throw new Error('short echo');
    samples.push(performance.now() - t0);
  }
  await download(32 << 20);
  const t0 = performance.now();
  const bytes = await download(256 << 20);
  const mbps = bytes / (1 << 20) / ((performance.now() - t0) / 1000);
  const fullDuplex = await duplex();
  return { name, p50: percentile(samples, 0.5), p99: percentile(samples, 0.99), mbps, fullDuplex };
}

// node:http2
const session = connect(origin, { rejectUnauthorized: false, settings: { initialWindowSize: 8 << 20 } });
await new Promise((resolve) => session.once('connect', resolve));
session.setLocalWindowSize(32 << 20);
const nodeRequest = (path: string, body?: Buffer): Promise<number> =>
  new Promise((resolve, reject) => {
    const stream = session.request({ ':method': body ? 'POST' : 'GET', ':path': path });
    let n = 0;
    stream.on('data', (d: Buffer) => void (n += d.length));
    stream.on('end', () => resolve(n));
    stream.on('error', reject);
    stream.end(body);
  });
const nodeDuplex = (): Promise<boolean> =>
  new Promise((resolve) => {
    const stream = session.request({ ':method': 'POST', ':path': '/echo' });
    const timer = setTimeout(() => resolve(false), 2000);
    stream.once('data', () => {
      clearTimeout(timer);
      stream.close();
      resolve(true);
    });
    stream.write(payload); // the request is still open: does its echo come back?
  });

// undici (allowH2)
const client = new Client(origin, { allowH2: true, connect: { rejectUnauthorized: false } });
const undiciRequest = async (path: string, body?: Buffer): Promise<number> => {
  const response = await client.request({ path, method: body ? 'POST' : 'GET', body });
  let n = 0;
  for await (const chunk of response.body) n += (chunk as Buffer).length;
  return n;
};
const undiciDuplex = async (): Promise<boolean> => {
  let release!: () => void;
  const hold = new Promise<void>((resolve) => (release = resolve));
  async function* body() {
    yield payload;
    await hold; // keep the request open until the first echo arrives — or give up
  }
  const timer = setTimeout(() => release(), 2000);
  const started = Date.now();
  try {
    const response = await client.request({ path: '/echo', method: 'POST', body: body() });
    for await (const _ of response.body) {
      const early = Date.now() - started < 1900;
      release();
      clearTimeout(timer);
      for await (const __ of response.body) void __;
      return early;
    }
  } catch {
    /* counted as no */
  }
  clearTimeout(timer);
  return false;
};

const results = [
  await measure('node:http2', () => nodeRequest('/echo', payload), (t) => nodeRequest(`/download?total=${t}`), nodeDuplex),
  await measure('undici 7 (allowH2)', () => undiciRequest('/echo', payload), (t) => undiciRequest(`/download?total=${t}`), undiciDuplex),
];
console.log(`HTTP/2 clients against one node:http2 TLS 1.3 server, Node ${process.version}`);
console.log('| client | 1 KB RTT p50 ms | p99 ms | bulk MB/s | full duplex on one stream |');
console.log('|---|---|---|---|---|');
for (const r of results) console.log(`| ${r.name} | ${r.p50.toFixed(3)} | ${r.p99.toFixed(3)} | ${r.mbps.toFixed(0)} | ${r.fullDuplex ? 'yes' : 'no'} |`);
session.close();
await client.close();
server.close();
