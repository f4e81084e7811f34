/**
 * 1 KB request/response round trips over @agentlink/ws next to raw `ws` (plain and TLS), in one run, with the
 * servers in a second process. Usage: pnpm --filter @agentlink/benchmarks rtt [rounds]
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createAgent, Identity, selfSignedCertificate } from '@agentlink/core';
import { webSocket } from '@agentlink/ws';
import { WebSocket, WebSocketServer } from 'ws';

const PAYLOAD = Buffer.alloc(1024, 7);

if (process.argv[2] === 'serve') {
  const plain = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
  plain.on('connection', (ws) => ws.on('message', (data) => ws.send(data)));
  const tls = selfSignedCertificate(Identity.generate());
  const https = createServer({ ...tls, minVersion: 'TLSv1.3' });
  const secure = new WebSocketServer({ server: https, perMessageDeflate: false });
  secure.on('connection', (ws) => ws.on('message', (data) => ws.send(data)));
  await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
  const agent = await createAgent({ channels: [webSocket({ port: 0 })] });
  agent.handle('echo', (body: unknown) => body);
  process.stdout.write(
    `${JSON.stringify({
      ws: `ws://127.0.0.1:${(plain.address() as AddressInfo).port}`,
      wss: `wss://127.0.0.1:${(https.address() as AddressInfo).port}`,
      agentlink: agent.addresses[0],
    })}\n`,
  );
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
} else {
  const rounds = Number(process.argv[2] ?? 5000);
  const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), 'serve'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout, 'data')) as [Buffer];
  const urls = JSON.parse(line.toString()) as { ws: string; wss: string; agentlink: string };

  const rawEcho = async (url: string): Promise<() => Promise<void>> => {
    const ws = new WebSocket(url, { rejectUnauthorized: false, perMessageDeflate: false });
    await once(ws, 'open');
    return () =>
      new Promise<void>((resolve) => {
        ws.once('message', () => resolve());
        ws.send(PAYLOAD);
      });
  };
  const agent = await createAgent({ channels: [webSocket()] });
  const subjects: Array<[string, () => Promise<void>]> = [
    ['raw ws (plain)', await rawEcho(urls.ws)],
    ['raw ws (TLS 1.3)', await rawEcho(urls.wss)],
    ['@agentlink/ws (TLS 1.3, mutual)', async () => void (await agent.send(urls.agentlink, 'echo', PAYLOAD))],
  ];

  const results: Array<{ name: string; p50: number; p99: number; mean: number }> = [];
  for (const [name, call] of subjects) {
    for (let i = 0; i < 500; i++) await call(); // warm-up
    const samples = new Float64Array(rounds);
    for (let i = 0; i < rounds; i++) {
      const t0 = performance.now();
      await call();
      samples[i] = performance.now() - t0;
    }
    samples.sort();
    const at = (q: number): number => samples[Math.min(rounds - 1, Math.floor(q * rounds))]!;
    results.push({ name, p50: at(0.5), p99: at(0.99), mean: samples.reduce((a, b) => a + b, 0) / rounds });
  }
  const base = results[1]!;
  console.log(`1 KB request/response, ${rounds} sequential round trips each after 500 warm-up, Node ${process.version}`);
  console.log('| subject | p50 ms | p99 ms | mean ms | p50 vs raw TLS ws |');
  console.log('|---|---|---|---|---|');
  for (const r of results) {
    console.log(`| ${r.name} | ${r.p50.toFixed(3)} | ${r.p99.toFixed(3)} | ${r.mean.toFixed(3)} | ${(r.p50 / base.p50).toFixed(2)}× |`);
  }
  await agent.close();
  child.stdin.end();
  process.exit(0);
}
