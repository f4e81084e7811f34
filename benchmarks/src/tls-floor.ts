/**
 * What a server holds per idle mutually authenticated TLS 1.3 connection before agentlink adds anything: the floor
 * under the ws and http2 figures of `idle-peers`.
 *   node --conditions=source --import tsx benchmarks/src/tls-floor.ts [--peers 1000] [--rounds 2] [--procs 4]
 *        [--cases tls,tls-no-ticket,tls-no-client-cert,wss,wss-no-ticket] [--semi-space-mib 0]
 * Per case and round: a bare server alone in its process (--expose-gc) — node:tls echoing, node:https + the
 * `ws` library echoing one message, or node:http2 answering one POST — with a throwaway Ed25519 agent certificate,
 * asking for the client's unless the case says not; `--peers` clients in `--procs` other processes connect 25 at a
 * time, exchange one message and stay idle for 3 s; (RSS − baseline) / peers after three full collections, and the
 * JS heap of the same readings.
 * `-no-ticket` cases set SSL_OP_NO_TICKET on the server, as the ws and http2 listeners do. The `h2` cases (not run
 * by default) are node:http2 without agentlink: `h2-no-ticket` with node's default settings, `h2-agentlink-settings`
 * with the http2 channel's SETTINGS, windows and maxSessionMemory, `h2-reverse` the same plus the long-lived stream
 * every agentlink client opens (held by the server unanswered, as the channel holds it until it calls back).
 * `--semi-space-mib` caps V8's young generation in the server as `idle-peers` does (0 = V8's default).
 */
import { fork } from 'node:child_process';
import { constants } from 'node:crypto';
import { once } from 'node:events';
import { connect as connectHttp2, createSecureServer, type ClientHttp2Session, type ServerHttp2Session } from 'node:http2';
import { createServer as createHttpsServer } from 'node:https';
import { connect, createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Identity } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import { WebSocket, WebSocketServer } from 'ws';
import { median } from './median.js';

type Case = 'tls' | 'tls-no-ticket' | 'tls-no-client-cert' | 'wss' | 'wss-no-ticket' | 'h2-no-ticket' | 'h2-agentlink-settings' | 'h2-reverse';
const script = fileURLToPath(import.meta.url);
/** The http2 channel's SETTINGS and windows (packages/http2/src/http2-transport.ts, defaults). */
const AGENTLINK_H2 = { settings: { initialWindowSize: 8 * 1024 * 1024, maxConcurrentStreams: 1000, enablePush: false }, maxSessionMemory: 80 };
const AGENTLINK_SESSION_WINDOW = 32 * 1024 * 1024;
const REVERSE = { ':method': 'POST', ':path': '/agentlink/reverse' };
const credentials = (): { key: string; cert: string } => selfSignedCertificate(Identity.generate());

async function serve(kind: Case, peers: number, procs: number): Promise<{ rssKiB: number; heapKiB: number }> {
  const { key, cert } = credentials();
  const options = {
    key,
    cert,
    minVersion: 'TLSv1.3' as const,
    requestCert: kind !== 'tls-no-client-cert',
    rejectUnauthorized: false,
    ...(kind.endsWith('no-ticket') ? { secureOptions: constants.SSL_OP_NO_TICKET } : {}),
  };
  const held: unknown[] = [];
  let server;
  if (kind.startsWith('h2')) {
    const agentlinkSettings = kind !== 'h2-no-ticket';
    server = createSecureServer({ ...options, secureOptions: constants.SSL_OP_NO_TICKET, allowHTTP1: false, ...(agentlinkSettings ? AGENTLINK_H2 : {}) });
    server.on('session', (session: ServerHttp2Session) => {
      held.push(session);
      session.on('error', () => undefined);
      if (agentlinkSettings) session.setLocalWindowSize(AGENTLINK_SESSION_WINDOW);
    });
    server.on('stream', (stream, headers) => {
      stream.on('error', () => undefined);
      if (headers[':path'] === REVERSE[':path']) return held.push(stream); // held open, unanswered
      stream.respond({ ':status': 200 });
      stream.on('data', (data: Buffer) => stream.end(data));
    });
  } else if (kind.startsWith('wss')) {
    server = createHttpsServer(options);
    const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
    server.on('upgrade', (request, socket, head) =>
      wss.handleUpgrade(request, socket, head, (ws) => {
        held.push(ws);
        ws.on('message', (data) => ws.send(data));
      }),
    );
  } else {
    server = createTlsServer(options, (socket: TLSSocket) => {
      held.push(socket);
      socket.on('data', (data) => socket.write(data));
      socket.on('error', () => undefined);
    });
  }
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const memory = async (): Promise<NodeJS.MemoryUsage> => {
    for (let i = 0; i < 3; i++) {
      globalThis.gc?.();
      await sleep(50);
    }
    return process.memoryUsage();
  };
  await sleep(300);
  const before = await memory();
  const per = Math.ceil(peers / procs);
  const children = Array.from({ length: procs }, (_, i) =>
    fork(script, ['clients', kind, String(port), String(Math.min(per, peers - i * per))], { execArgv: process.execArgv.filter((a) => a !== '--expose-gc' && !a.startsWith('--max-semi-space-size')) }),
  );
  await Promise.all(children.map((c) => once(c, 'message')));
  const sessions = kind === 'h2-reverse' ? 2 * peers : peers; // the session and its reverse stream
  if (held.length !== sessions) throw new Error(`${held.length} of ${peers} connected`);
  await sleep(3000);
  const after = await memory();
  for (const c of children) c.disconnect();
  return { rssKiB: (after.rss - before.rss) / 1024 / peers, heapKiB: (after.heapUsed - before.heapUsed) / 1024 / peers };
}

async function clients(kind: Case, port: number, count: number): Promise<void> {
  const { key, cert } = credentials();
  const kept: unknown[] = [];
  const one = (): Promise<void> =>
    new Promise((resolve, reject) => {
      if (kind.startsWith('h2')) {
        const agentlinkSettings = kind !== 'h2-no-ticket';
        const session: ClientHttp2Session = connectHttp2(`https://127.0.0.1:${port}`, { key, cert, rejectUnauthorized: false, minVersion: 'TLSv1.3', ...(agentlinkSettings ? AGENTLINK_H2 : {}) });
        session.once('error', reject);
        if (agentlinkSettings) session.once('connect', () => session.setLocalWindowSize(AGENTLINK_SESSION_WINDOW));
        if (kind === 'h2-reverse') kept.push(session.request(REVERSE, { endStream: false }));
        const request = session.request({ ':method': 'POST', ':path': '/' });
        request.once('data', () => resolve());
        request.end(Buffer.from('x'));
        kept.push(session);
      } else if (kind.startsWith('wss')) {
        const ws = new WebSocket(`wss://127.0.0.1:${port}/`, { key, cert, rejectUnauthorized: false, perMessageDeflate: false });
        ws.once('open', () => ws.send(Buffer.from('x')));
        ws.once('message', () => resolve());
        ws.once('error', reject);
        kept.push(ws);
      } else {
        const socket = connect({ port, host: '127.0.0.1', key, cert, rejectUnauthorized: false, minVersion: 'TLSv1.3' }, () => void socket.write('x'));
        socket.once('data', () => resolve());
        socket.once('error', reject);
        kept.push(socket);
      }
    });
  for (let i = 0; i < count; i += 25) await Promise.all(Array.from({ length: Math.min(25, count - i) }, one));
  process.send!('ready');
  process.on('disconnect', () => process.exit(0));
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      peers: { type: 'string', default: '1000' },
      rounds: { type: 'string', default: '2' },
      procs: { type: 'string', default: '4' },
      cases: { type: 'string', default: 'tls,tls-no-ticket,tls-no-client-cert,wss,wss-no-ticket' },
      'semi-space-mib': { type: 'string', default: '0' },
    },
  });
  const cases = values.cases.split(',') as Case[];
  const results = new Map<Case, { rssKiB: number; heapKiB: number }[]>(cases.map((c) => [c, []]));
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const kind of cases) {
      const semiSpace = Number(values['semi-space-mib']) > 0 ? [`--max-semi-space-size=${values['semi-space-mib']}`] : [];
      const server = fork(script, ['serve', kind, values.peers, values.procs], { execArgv: [...process.execArgv, '--expose-gc', ...semiSpace] });
      const [sample] = (await once(server, 'message')) as [{ rssKiB: number; heapKiB: number }];
      await once(server, 'exit');
      results.get(kind)!.push(sample);
      console.error(`round ${round + 1} ${kind}: ${sample.rssKiB.toFixed(1)} KiB RSS per connection (heap ${sample.heapKiB.toFixed(1)})`);
    }
  }
  const fmt = (list: number[]): string => `${median(list).toFixed(1)} (${Math.min(...list).toFixed(1)}–${Math.max(...list).toFixed(1)})`;
  console.log(`server memory per idle TLS connection, ${values.peers} connections, KiB: median (range)`);
  console.log('| case | RSS | JS heap |');
  console.log('|---|---|---|');
  for (const [kind, list] of results) console.log(`| ${kind} | ${fmt(list.map((s) => s.rssKiB))} | ${fmt(list.map((s) => s.heapKiB))} |`);
}

const [role, ...args] = process.argv.slice(2);
if (role === 'serve') {
  const sample = await serve(args[0] as Case, Number(args[1]), Number(args[2]));
  process.send!(sample, () => process.exit(0));
} else if (role === 'clients') {
  await clients(args[0] as Case, Number(args[1]), Number(args[2]));
} else {
  await main();
}
