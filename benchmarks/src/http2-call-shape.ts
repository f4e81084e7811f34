/**
 * The floor under @agentlink/http2's round trip: what node:http2 itself costs for the shape of an agentlink call,
 * before agentlink encodes, validates or dispatches a byte. Three subjects against one node:http2 TLS 1.3 server
 * in a second process, 1 KB each way, rounds interleaved so machine drift hits all alike:
 * - `raw echo`: agentbench's baseline. The request ends with its body (END_STREAM on the DATA frame); the server
 *   answers at the request's end.
 * - `call shape`: what an agentlink call does on the wire. The request stays open after its body (the caller
 *   may still cancel), the server answers on the first bytes, and the caller ends its side once answered.
 * - `call shape + options`: the same with `request(headers, { endStream: false })`, which agentlink passed
 *   until node's request() was measured slower with any options object.
 * Usage: pnpm --filter @agentlink/benchmarks http2-call-shape
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { connect, createSecureServer, type ClientHttp2Session } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Identity, selfSignedCertificate } from '@agentlink/core';

if (process.argv[2] === 'serve') {
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
    stream.resume();
  });
  server.listen(0, '127.0.0.1', () => process.send!((server.address() as AddressInfo).port));
  process.on('disconnect', () => process.exit(0));
} else {
  const child = fork(new URL(import.meta.url).pathname, ['serve'], { execArgv: process.execArgv });
  const [port] = (await once(child, 'message')) as [number];
  const session: ClientHttp2Session = connect(`https://127.0.0.1:${port}`, { rejectUnauthorized: false, settings: { initialWindowSize: 8 << 20 } });
  await once(session, 'connect');
  const payload = Buffer.alloc(1024, 1);
  const headers = { ':method': 'POST', ':path': '/call', 'content-type': 'application/agentlink' };

  const rawEcho = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const stream = session.request({ ':method': 'POST', ':path': '/echo' });
      stream.on('data', () => undefined);
      stream.on('end', resolve);
      stream.on('error', reject);
      stream.end(payload);
    });
  const callShape = (withOptions: boolean) => (): Promise<void> =>
    new Promise((resolve, reject) => {
      const stream = withOptions ? session.request(headers, { endStream: false }) : session.request(headers);
      stream.once('data', () => {
        resolve();
        stream.end();
      });
      stream.on('error', reject);
      stream.write(payload);
    });

  const subjects: Record<string, () => Promise<void>> = {
    'raw echo': rawEcho,
    'call shape': callShape(false),
    'call shape + options': callShape(true),
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
  const median = (values: number[]): number => [...values].sort((a, b) => a - b)[values.length >> 1]!;
  const base = median(p50s['raw echo']!);
  console.log(`node ${process.version}, 1 KB each way, median of ${rounds - 1} interleaved rounds of 3,000 calls`);
  console.log('| subject | p50 µs | × raw echo |\n|---|---|---|');
  for (const name of Object.keys(subjects)) {
    const p50 = median(p50s[name]!);
    console.log(`| ${name} | ${(p50 * 1000).toFixed(1)} | ${(p50 / base).toFixed(2)} |`);
  }
  session.close();
  child.disconnect();
}
