/**
 * Can a few IPv4 addresses hold all of a listener's connections (docs/security.md, "Who may hold a listener's
 * connections")? Not a test (a measurement): run with
 *
 *   node --conditions=source --import tsx packages/ws/test/hold-listener.measure.ts [addresses] [seconds] [mode] [perIp] [repingSeconds]
 *
 * A ws listener with the default ListenerLimits runs in its own process. `addresses` strangers (127.0.0.2, .3, …,
 * each a different host on loopback) open connections as fast as the listener takes them and hold them:
 * - mode `tcp`: plain TCP, never a byte of TLS (the listener drops each at its 5 s handshake bound; the stranger
 *   reconnects, within the per-IP rate);
 * - mode `tls`: 1,024 connections per address (the per-IP limit), each a full TLS handshake with a fresh key and an
 *   upgrade, then silence (what a stranger holds for the pool's idle timeout, 5 minutes, or for ever with a ping
 *   every few minutes).
 * - mode `agents`: 1,024 real agents per address (fresh keys), each pinging once and then idle: they answer the
 *   listener's health checks (30 s), which close the silent connections of mode `tls`, and a call every few minutes
 *   would keep them past the idle timeout (5 minutes).
 * Every 250 ms an honest agent at 127.0.0.1 with a fresh key pings the listener on a new connection (2 s timeout).
 * Prints per second: connections the strangers hold, and the honest pings that succeeded.
 *
 * `perIp` scales the attack down: the listener then takes `perIp` connections per IP and `addresses × perIp` in
 * all (the defaults' proportions: 1,024 and 4,096 for 4 addresses), and each stranger address runs `perIp` agents.
 * With `repingSeconds` (mode `agents`), every stranger agent pings again that often, so an agent whose connection
 * was evicted dials again (and is refused while its address no longer holds the most).
 */
import { spawn } from 'node:child_process';
import { connect as tcpConnect, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createAgent, type Agent } from '@agentlink/core';
import { RawWebSocket } from '../../conformance/src/hostile/raw-websocket.js';
import { webSocket } from '../src/index.js';

const addresses = Number(process.argv[2] ?? 4);
const seconds = Number(process.argv[3] ?? 15);
const mode = process.argv[4] ?? 'tcp';
const perIp = process.argv[5] === undefined ? 1024 : Number(process.argv[5]);
const repingMs = Number(process.argv[6] ?? 0) * 1000;
const limits = process.argv[5] === undefined ? {} : { limits: { maxConnections: addresses * perIp, maxConnectionsPerIp: perIp } };
/** What each stranger tries per second: a little over the listener's per-IP rate (200/s), the excess refused. */
const TRIES_PER_SECOND = 250;

const script = fileURLToPath(new URL('../../conformance/src/peer-process.ts', import.meta.url));
const spec = { module: new URL('../src/index.ts', import.meta.url).href, factory: 'webSocket', listenOptions: { port: 0, host: '0.0.0.0', ...limits } };
const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', script, JSON.stringify(spec)], { stdio: ['pipe', 'pipe', 'inherit'] });
const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
const listening = JSON.parse((await lines.next()).value as string) as { address: string };
const port = Number(new URL(listening.address.slice(listening.address.indexOf('@') + 1)).port);
const address = listening.address.replace('0.0.0.0', '127.0.0.1');
const url = new URL(address.slice(address.indexOf('@') + 1));

let held = 0;
let stop = false;
const holders: (Socket | RawWebSocket)[] = [];
const strangerAgents: Agent[] = [];
async function stranger(ip: string): Promise<void> {
  if (mode === 'agents') {
    // `perIp` agents (the per-IP limit), each with a fresh key and its own connection, 16 dialling at a time; each
    // pings once and then stays silent (or pings again every `repingSeconds`), answering the listener's health
    // checks as any agent does.
    let opened = 0;
    const worker = async (): Promise<void> => {
      while (!stop && opened < perIp) {
        opened++;
        const agent = await createAgent({ channels: [webSocket({ localAddress: ip })] });
        strangerAgents.push(agent);
        const ok = await agent.ping(address, { timeoutMs: 10_000 }).then(
          () => true,
          () => false,
        );
        // With `repingSeconds`, one refused (the listener was full) keeps trying too: strangers take every place.
        if (repingMs > 0) void reping(agent);
        if (!ok) continue;
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    return;
  }
  if (mode === 'tls') {
    // 1,024 upgraded connections (the per-IP limit), 16 handshakes at a time, each with a fresh key; then silence.
    let opened = 0;
    const worker = async (): Promise<void> => {
      while (!stop && opened < 1024) {
        opened++;
        const ws = await RawWebSocket.connect(url, url.pathname, { localAddress: ip }).catch(() => undefined);
        if (!ws) continue;
        if (ws.status !== 101) {
          ws.destroy();
          continue;
        }
        held++;
        ws.socket.once('close', () => held--);
        holders.push(ws);
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    return;
  }
  while (!stop) {
    const started = performance.now();
    for (let i = 0; i < TRIES_PER_SECOND / 10 && !stop; i++) {
      const socket = tcpConnect({ host: '127.0.0.1', port, localAddress: ip });
      socket.on('error', () => undefined);
      socket.once('connect', () => {
        held++;
        socket.once('close', () => held--);
      });
      holders.push(socket);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 100 - (performance.now() - started))));
  }
}

let strangerRedials = 0;
let strangerRedialsAnswered = 0;
/** A stranger that keeps calling: after an eviction its next ping dials again. */
async function reping(agent: Agent): Promise<void> {
  while (!stop) {
    await new Promise((resolve) => setTimeout(resolve, repingMs * (0.5 + Math.random())));
    if (stop) return;
    const redial = agent.channels().length === 0;
    if (redial) strangerRedials++;
    const ok = await agent.ping(address, { timeoutMs: 10_000 }).then(
      () => true,
      () => false,
    );
    if (redial && ok) strangerRedialsAnswered++;
  }
}

let tried = 0;
let answered = 0;
const failures = new Map<string, number>();
async function honest(): Promise<void> {
  while (!stop) {
    tried++;
    const agent = await createAgent({ channels: [webSocket({ localAddress: '127.0.0.1' })] });
    await agent.ping(address, { timeoutMs: 2000 }).then(
      () => answered++,
      (error: { code?: string }) => failures.set(error.code ?? '?', (failures.get(error.code ?? '?') ?? 0) + 1),
    );
    await agent.close();
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

const ips = Array.from({ length: addresses }, (_, i) => `127.0.0.${i + 2}`);
const running = [...ips.map(stranger), honest()];
for (let s = 1; s <= seconds; s++) {
  await new Promise((resolve) => setTimeout(resolve, 1000));
  if (mode === 'agents') held = strangerAgents.reduce((n, a) => n + a.channels().length, 0);
  const redials = repingMs > 0 ? { strangerRedials: `${strangerRedialsAnswered}/${strangerRedials}` } : {};
  console.log(JSON.stringify({ second: s, mode, addresses, perIp, strangersHold: held, honestPings: `${answered}/${tried}`, failures: Object.fromEntries(failures), ...redials }));
}
stop = true;
await Promise.all(running);
for (const h of holders) (h as { destroy(): void }).destroy();
await Promise.all(strangerAgents.map((a) => a.close()));
child.stdin!.end();
