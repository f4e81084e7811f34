/**
 * Where a burst's time goes when caller and handler are two processes (as in agentbench, unlike token-burst): a
 * handler yields N tokens of 16 bytes as fast as it can; the caller notes when tokens #0, #1, #2, #N/2 and the last
 * arrive, and the handler when it started and had produced them (the clocks are comparable: both processes use
 * performance.timeOrigin + now(), in ms from the call). Builds (snapshots of `ab-builds snapshot <name>`, or
 * `current`) and channels take turns in rounds, each build with its own serving process.
 *
 *   pnpm build && pnpm --filter @agentlink/benchmarks burst-timeline [--builds current] [--channels ws,http2,quic]
 *     [--rounds 30] [--tokens 1000] [--pin | --pin-loops same|apart]
 *
 * `--pin`: the serving processes run on CPU 1 and the caller on CPU 0 (taskset), so the scheduler cannot wake the
 * caller on the core its busy producer holds.
 *
 * `--pin-loops same|apart`: only the event loops' threads are pinned (the caller's on CPU 0, the serving processes'
 * on CPU 0 too or on CPU 1); the engine's and libuv's threads go where the scheduler puts them. `same` is what a
 * slow round looks like when the scheduler keeps both loops on one core (docs/quic.md, "A burst's first token").
 *
 * Channel `rawquic` is agentbench's raw QUIC engine subject (no framing, codec or dispatch: the handler is one
 * `tryWrite` per token on the stream, the caller reads by pull), with the same marks, so QUIC's own share of the
 * channel's time to first token shows beside it; `rawws` and `rawh2` are agentbench's raw ws (TLS) and raw
 * node:http2 (TLS) subjects (one `ws.send` or `stream.write` per token; the caller counts messages or chunks in
 * their event callbacks, as agentbench's raw subjects do). Each round also times one 1 KB echo per subject (a
 * unary call on the agentlink channels), so a burst's first token can be read against the same round's round trip.
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createSecureServer, connect as connectHttp2, type ServerHttp2Stream } from 'node:http2';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { readAll, requestBurst, serveStreams } from './native-read.js';
import { answerEcho } from './http2-echo.js';

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    builds: { type: 'string', default: 'current' },
    channels: { type: 'string', default: 'ws,http2,quic' },
    rounds: { type: 'string', default: '30' },
    tokens: { type: 'string', default: '1000' },
    pin: { type: 'boolean', default: false },
    'pin-loops': { type: 'string' },
  },
});
const TOKENS = Number(args.tokens);
const TOKEN_BYTES = 16;
/** 1 KB echoes per subject and round, before its burst (agentbench's round trip); the round keeps their median. */
const ECHOES = 20;
const PAYLOAD = Buffer.alloc(1024, 5);
const root = fileURLToPath(new URL('../../', import.meta.url));
const now = (): number => performance.timeOrigin + performance.now();

async function load(build: string, pkg: string): Promise<Record<string, any>> {
  if (build === 'current') return import(`@agentlink/${pkg}`);
  return import(join(root, 'benchmarks/.builds', build, 'node_modules/@agentlink', pkg, 'dist/index.js'));
}

async function transports(build: string, channels: string[], listen: boolean): Promise<unknown[]> {
  const options = listen ? { port: 0 } : {};
  channels = channels.filter((channel) => !channel.startsWith('raw'));
  const made: Record<string, () => Promise<unknown>> = {
    ws: async () => (await load(build, 'ws')).webSocket(options),
    http2: async () => (await load(build, 'http2')).http2(options),
    quic: async () => (await load(build, 'quic')).quic(options),
  };
  return Promise.all(channels.map((channel) => made[channel]!()));
}

function pin(cpu: number): void {
  execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(process.pid)], { stdio: 'ignore' });
}

const pinLoops = args['pin-loops'];
if (pinLoops !== undefined && pinLoops !== 'same' && pinLoops !== 'apart') throw new Error('--pin-loops takes same or apart');
if (pinLoops !== undefined && args.pin) throw new Error('--pin and --pin-loops exclude each other');

/** Pins this process's event-loop thread only (its id is the process's): without -a, taskset leaves the others. */
function pinLoop(cpu: number): void {
  execFileSync('taskset', ['-p', '-c', String(cpu), String(process.pid)], { stdio: 'ignore' });
}

/** The serving process: one agent with every channel; after each burst it sends its marks to the caller. */
async function serve(build: string, channels: string[]): Promise<void> {
  if (args.pin) pin(1);
  if (pinLoops !== undefined) pinLoop(pinLoops === 'same' ? 0 : 1);
  process.on('SIGTERM', () => process.exit(0));
  const { createAgent, Identity } = await load(build, 'core');
  const agent = await createAgent({ channels: await transports(build, channels, true) });
  agent.handle('echo', (body: unknown) => body);
  agent.handleStream('burst', async function* ({ count }: { count: number }) {
    const token = Buffer.alloc(TOKEN_BYTES, 7);
    const marks = [now()];
    for (let i = 0; i < count; i++) {
      yield token;
      if (i < 3 || i === count >> 1 || i === count - 1) marks.push(now());
    }
    process.send!(marks);
  });
  // The agent's addresses come in the order of its channels (every channel but the raw ones).
  const own = [...agent.addresses] as string[];
  const addresses: string[] = [];
  const raw: Record<string, () => Promise<string>> = {
    rawquic: () => serveRawQuic(build, Identity),
    rawws: () => serveRawWs(Identity),
    rawh2: () => serveRawHttp2(Identity),
  };
  for (const channel of channels) addresses.push(raw[channel] ? await raw[channel]() : own.shift()!);
  process.send!(addresses);
}

async function rawTls(Identity: any): Promise<{ key: string; cert: string }> {
  const { selfSignedCertificate } = await import(join(root, 'packages/core/dist/transport.js'));
  return selfSignedCertificate(Identity.generate());
}

/** agentbench's raw ws (TLS) server: a binary message echoes; the text "burst N" is N binary messages, then "done". */
async function serveRawWs(Identity: any): Promise<string> {
  const tls = await rawTls(Identity);
  const https = createHttpsServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3' });
  const wss = new WebSocketServer({ server: https, perMessageDeflate: false });
  wss.on('connection', (ws) => {
    ws.on('message', (data, isBinary) => {
      if (isBinary) return ws.send(data as Buffer);
      const count = Number(data.toString().split(' ')[1]);
      const token = Buffer.alloc(TOKEN_BYTES, 7);
      const marks = [now()];
      for (let i = 0; i < count; i++) {
        ws.send(token);
        if (i < 3 || i === count >> 1 || i === count - 1) marks.push(now());
      }
      ws.send('done');
      process.send!(marks);
    });
  });
  await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
  return `wss://127.0.0.1:${(https.address() as AddressInfo).port}`;
}

/** agentbench's raw node:http2 (TLS) server: POST /echo returns the body; GET /burst?count=N writes N chunks. */
async function serveRawHttp2(Identity: any): Promise<string> {
  const tls = await rawTls(Identity);
  const h2 = createSecureServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3', settings: { initialWindowSize: 8 * 1024 * 1024 } });
  h2.on('session', (session) => session.setLocalWindowSize(32 * 1024 * 1024));
  h2.on('stream', (stream: ServerHttp2Stream, headers) => {
    const url = new URL(headers[':path'] ?? '/', 'https://x');
    if (url.pathname === '/echo') return answerEcho(stream);
    const count = Number(url.searchParams.get('count'));
    const token = Buffer.alloc(TOKEN_BYTES, 7);
    const marks = [now()];
    stream.respond({ ':status': 200 });
    for (let i = 0; i < count; i++) {
      stream.write(token);
      if (i < 3 || i === count >> 1 || i === count - 1) marks.push(now());
    }
    stream.end();
    process.send!(marks);
  });
  await new Promise<void>((resolve) => h2.listen(0, '127.0.0.1', resolve));
  return `https://127.0.0.1:${(h2.address() as AddressInfo).port}`;
}

/** agentbench's raw ws caller: each binary message is a token (counted in the message callback). */
async function rawWsClient(url: string): Promise<Client> {
  const ws = new WebSocket(url, { rejectUnauthorized: false, perMessageDeflate: false });
  await once(ws, 'open');
  let onBinary: ((data: Buffer) => void) | undefined;
  let onText: (() => void) | undefined;
  ws.on('message', (data: Buffer, isBinary) => (isBinary ? onBinary?.(data) : onText?.()));
  return {
    burst: (count, onToken) =>
      new Promise<void>((resolve) => {
        onBinary = () => onToken();
        onText = () => resolve();
        ws.send(`burst ${count}`);
      }),
    echo: (payload) =>
      new Promise<void>((resolve) => {
        onBinary = () => resolve();
        ws.send(payload);
      }),
    async close() {
      ws.terminate();
    },
  };
}

/** agentbench's raw node:http2 caller: one request stream per burst or echo; the burst's tokens counted by bytes. */
async function rawHttp2Client(url: string): Promise<Client> {
  const session = connectHttp2(url, { rejectUnauthorized: false, minVersion: 'TLSv1.3', settings: { initialWindowSize: 8 * 1024 * 1024 } });
  await once(session, 'connect');
  session.setLocalWindowSize(32 * 1024 * 1024);
  return {
    burst: (count, onToken) =>
      new Promise<void>((resolve, reject) => {
        const stream = session.request({ ':path': `/burst?count=${count}`, ':method': 'GET' });
        stream.on('data', (d: Buffer) => {
          for (let at = 0; at < d.length; at += TOKEN_BYTES) onToken();
        });
        stream.on('end', resolve);
        stream.on('error', reject);
        stream.end();
      }),
    echo: (payload) =>
      new Promise<void>((resolve, reject) => {
        const stream = session.request({ ':path': '/echo', ':method': 'POST' });
        stream.on('data', () => undefined);
        stream.on('end', resolve);
        stream.on('error', reject);
        stream.end(payload);
      }),
    async close() {
      session.destroy();
    },
  };
}

/** agentbench's raw QUIC engine server, burst only: a 4-byte count, then one `tryWrite` per token. */
async function serveRawQuic(build: string, Identity: any): Promise<string> {
  const { loadNative } = await load(build, 'quic');
  const { selfSignedCertificate } = await import(join(root, 'packages/core/dist/transport.js'));
  const native = loadNative();
  if (!native.ok) throw new Error(native.reason);
  const identity = Identity.generate();
  const tls = selfSignedCertificate(identity);
  const endpoint = await native.binding.bindEndpoint({ host: '127.0.0.1', port: 0, cert: tls.certDer, key: tls.keyDer, accept: true });
  const serveStream = async (stream: any): Promise<void> => {
    const count = (await readAll(stream)).readUInt32BE(0);
    const token = Buffer.alloc(TOKEN_BYTES, 7);
    const marks = [now()];
    for (let i = 0; i < count; i++) {
      const taken = stream.tryWrite(token);
      if (taken < token.length) await stream.write(token.subarray(taken));
      if (i < 3 || i === count >> 1 || i === count - 1) marks.push(now());
    }
    if (!stream.tryFinish()) await stream.finish();
    stream.release();
    process.send!(marks);
  };
  serveStreams(endpoint, serveStream);
  return `${endpoint.localPort}:${identity.id}`;
}

/** A subject's caller: a burst (`onToken` per token, in the callback that brought it), a 1 KB echo. */
interface Client {
  burst(count: number, onToken: () => void): Promise<void>;
  echo(payload: Buffer): Promise<void>;
  close(): Promise<void>;
}

/** The raw engine's caller, as agentbench's subject: pull reads, the tokens counted by bytes. */
async function rawQuicClient(build: string, address: string): Promise<Client> {
  const { loadNative } = await load(build, 'quic');
  const { Identity, publicKeyFromAgentId } = await load(build, 'core');
  const { selfSignedCertificate } = await import(join(root, 'packages/core/dist/transport.js'));
  const binding = loadNative().binding;
  const [port, key] = address.split(':') as [string, string];
  const tls = selfSignedCertificate(Identity.generate());
  const endpoint = await binding.bindEndpoint({ host: '127.0.0.1', port: 0, cert: tls.certDer, key: tls.keyDer, accept: false });
  const connection = await endpoint.dial('127.0.0.1', Number(port), Buffer.from(publicKeyFromAgentId(key)), 5000).connection();
  return {
    async burst(count, onToken) {
      const stream = await requestBurst(connection, count);
      for (;;) {
        const data: Buffer | null = stream.tryRead(1 << 20) ?? (await stream.read(1 << 20));
        if (!data || data.length === 0) break;
        for (let at = 0; at < data.length; at += TOKEN_BYTES) onToken();
      }
      stream.release();
    },
    async echo(payload) {
      const stream = connection.tryOpenStream() ?? (await connection.openStream());
      const request = Buffer.concat([Buffer.from([0]), payload]);
      const taken = stream.tryWrite(request);
      if (taken < request.length) await stream.write(request.subarray(taken));
      if (!stream.tryFinish()) await stream.finish();
      await readAll(stream);
      stream.release();
    },
    async close() {
      connection.close(0, 'done');
      connection.release();
      endpoint.close(0, 'done');
    },
  };
}

interface Subject {
  build: string;
  channel: string;
  address: string;
  client: Client;
  server: ChildProcess;
  caller: number[][];
  handler: number[][];
  echoes: number[];
}

async function measure(): Promise<void> {
  if (args.pin) pin(0);
  if (pinLoops !== undefined) pinLoop(0);
  const channels = args.channels!.split(',');
  const subjects: Subject[] = [];
  for (const build of args.builds!.split(',')) {
    const server = fork(fileURLToPath(import.meta.url), ['serve', build, args.channels!, ...(args.pin ? ['--pin'] : []), ...(pinLoops !== undefined ? ['--pin-loops', pinLoops] : [])], { execArgv: process.execArgv });
    const [addresses] = (await once(server, 'message')) as [string[]];
    const { createAgent } = await load(build, 'core');
    const agent = await createAgent({ channels: await transports(build, channels, false) });
    for (const [i, channel] of channels.entries()) {
      const address = addresses[i]!;
      const raw: Record<string, () => Promise<Client>> = {
        rawquic: () => rawQuicClient(build, address),
        rawws: () => rawWsClient(address),
        rawh2: () => rawHttp2Client(address),
      };
      const client: Client = raw[channel]
        ? await raw[channel]()
        : {
            async burst(count, onToken) {
              for await (const _token of agent.stream(address, 'burst', { count })) onToken();
            },
            async echo(payload) {
              await agent.send(address, 'echo', payload);
            },
            close: () => agent.close(),
          };
      subjects.push({ build, channel, address, client, server, caller: [], handler: [], echoes: [] });
    }
  }
  const rounds = Number(args.rounds);
  const median = (values: number[]): number => [...values].sort((a, b) => a - b)[values.length >> 1]!;
  for (let round = 0; round < rounds; round++) {
    for (const subject of round % 2 === 0 ? subjects : [...subjects].reverse()) {
      const echoes: number[] = [];
      for (let e = 0; e < ECHOES; e++) {
        const sent = now();
        await subject.client.echo(PAYLOAD);
        echoes.push(now() - sent);
      }
      const handlerMarks = once(subject.server, 'message');
      const started = now();
      const marks: number[] = [];
      let i = 0;
      await subject.client.burst(TOKENS, () => {
        if (i < 3 || i === TOKENS >> 1 || i === TOKENS - 1) marks.push(now() - started);
        i++;
      });
      marks.push(now() - started); // the caller's loop has ended (agentbench's per-token figure ends here)
      const [handler] = (await handlerMarks) as [number[]];
      if (round > 0) {
        // The first round warms each subject up (JIT, the channel's first dial).
        subject.caller.push(marks);
        subject.handler.push(handler.map((t) => t - started));
        subject.echoes.push(median(echoes));
      }
    }
  }
  const column = (rows: number[][], k: number): string => median(rows.map((row) => row[k]!)).toFixed(2);
  const half = TOKENS >> 1;
  console.log(`${TOKENS} tokens of ${TOKEN_BYTES} bytes, two processes${args.pin ? ' (pinned: handler CPU 1, caller CPU 0)' : ''}${pinLoops !== undefined ? ` (event loops pinned: caller's CPU 0, handler's CPU ${pinLoops === 'same' ? 0 : 1})` : ''}; ms from the call, medians of ${rounds - 1} rounds`);
  console.log(`| build | channel | handler starts | #0 yielded | caller has #0 | #1 | #2 | #${half} yielded | caller has #${half} | last yielded | caller has the last | loop ended | µs per token (#0 to loop end) | 1 KB echo | #0 − echo |`);
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const s of subjects) {
    const h = (k: number): string => column(s.handler, k);
    const c = (k: number): string => column(s.caller, k);
    const perToken = median(s.caller.map((row) => ((row[5]! - row[0]!) * 1000) / (TOKENS - 1))).toFixed(2);
    const echo = median(s.echoes).toFixed(3);
    const overEcho = median(s.caller.map((row, r) => row[0]! - s.echoes[r]!)).toFixed(3);
    console.log(`| ${s.build} | ${s.channel} | ${h(0)} | ${h(1)} | ${c(0)} | ${c(1)} | ${c(2)} | ${h(4)} | ${c(3)} | ${h(5)} | ${c(4)} | ${c(5)} | ${perToken} | ${echo} | ${overEcho} |`);
  }
  await Promise.all(subjects.map((s) => s.client.close().catch(() => undefined)));
  for (const s of subjects) s.server.kill();
}

if (positionals[0] === 'serve') await serve(positionals[1]!, positionals[2]!.split(','));
else await measure();
