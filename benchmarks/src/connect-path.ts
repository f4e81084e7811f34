/**
 * How long a first call to a peer takes when no connection exists yet (handshake + a 1-byte request/response), for
 * agentlink ws and http2 next to the raw transports, in interleaved rounds.
 *   node --conditions=source --import tsx benchmarks/src/connect-path.ts [--rounds 40] [--warmup 5] [--repeat 1]
 *        [--only <names>] [--profile <prefix>]
 *   pnpm --filter @agentlink/benchmarks connect-path --builds base,after [...]   (snapshots: ab-builds snapshot <name>)
 * `--warmup 0 --repeat 10 --rounds 10` measures cold processes, as agentbench's connect samples are: each repetition
 * is a fresh client process with a fresh serving process, every subject's first connections.
 * The serving side runs in its own process (forked): one agentlink agent listening on ws and http2 (listener
 * limits raised, as agentbench's), raw https + `ws` echo servers and raw node:http2 echo servers, each once with
 * server authentication only (agentbench's baselines) and once asking for the client's certificate (mutual TLS 1.3
 * with Ed25519 certificates of the kind agentlink uses: what agentlink's identity model costs at least).
 * Each round runs every subject once, in turn (a slow spell of the shared machine lands on all of them); per subject
 * the median, the quartiles, and per agentlink subject the median of its per-round ratio to each raw one.
 * The client agent is made once (its key, certificate and TLS context, as in an application); every sample is a
 * fresh connection, closed after its call. `--profile` writes a CPU profile of each process over the measured rounds
 * (`<prefix>.client.cpuprofile`, `<prefix>.server.cpuprofile`). `--builds` measures agentlink from snapshots made
 * by `ab-builds snapshot <name>` instead of the source, each build as its own subjects (`agentlink ws [name]`) on both
 * sides (the serving process runs an agent of each build), with each one's ratio to the first build.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { connect as connectHttp2, createSecureServer, type ClientHttp2Session } from 'node:http2';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { createSecureContext } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { join } from 'node:path';
import { Identity } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import { WebSocket, WebSocketServer } from 'ws';
import { median } from './median.js';

interface Addresses {
  /** Per build ('' = the source): its agent's ws and http2 addresses. */
  agentlink: Record<string, { ws: string; http2: string }>;
  rawWss: string;
  rawWssMutual: string;
  rawHttp2: string;
  rawHttp2Mutual: string;
}

interface Subject {
  name: string;
  /** Connects and makes one 1-byte round trip (timed); then closes (not timed, as in agentbench). */
  once(): Promise<() => Promise<void>>;
}

const script = fileURLToPath(import.meta.url);
const buildsDir = fileURLToPath(new URL('../.builds/', import.meta.url));

interface Build {
  createAgent: typeof import('@agentlink/core').createAgent;
  webSocket: typeof import('@agentlink/ws').webSocket;
  http2: typeof import('@agentlink/http2').http2;
}

/** agentlink from the source (name '') or from an `ab-builds` snapshot. */
async function loadBuild(name: string): Promise<Build> {
  if (name === '') {
    const [core, ws, h2] = await Promise.all([import('@agentlink/core'), import('@agentlink/ws'), import('@agentlink/http2')]);
    return { createAgent: core.createAgent, webSocket: ws.webSocket, http2: h2.http2 };
  }
  const modules = join(buildsDir, name, 'node_modules/@agentlink');
  const [core, ws, h2] = await Promise.all([import(join(modules, 'core/dist/index.js')), import(join(modules, 'ws/dist/index.js')), import(join(modules, 'http2/dist/index.js'))]);
  return { createAgent: core.createAgent, webSocket: ws.webSocket, http2: h2.http2 };
}

async function serve(builds: string[]): Promise<void> {
  const identity = Identity.generate();
  const tls = selfSignedCertificate(identity);
  const limits = { maxConnections: 100_000, maxConnectionsPerIp: 100_000, newConnectionsPerIpPerSecond: 100_000 };
  const agentlink: Addresses['agentlink'] = {};
  for (const name of builds) {
    const build = await loadBuild(name);
    const agent = await build.createAgent({ identity, channels: [build.http2({ port: 0, limits }), build.webSocket({ port: 0, limits })] });
    agent.handle('echo', (body: unknown) => body);
    agentlink[name] = { ws: agent.addresses.find((a) => a.includes('@wss://'))!, http2: agent.addresses.find((a) => a.includes('@h2://'))! };
  }

  const wsServer = async (mutual: boolean): Promise<string> => {
    const https = createHttpsServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3', requestCert: mutual, rejectUnauthorized: false });
    const wss = new WebSocketServer({ server: https, perMessageDeflate: false });
    wss.on('connection', (ws) => ws.on('message', (data) => ws.send(data as Buffer)));
    await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
    return `wss://127.0.0.1:${(https.address() as AddressInfo).port}`;
  };
  const h2Server = async (mutual: boolean): Promise<string> => {
    const h2 = createSecureServer({ key: tls.key, cert: tls.cert, minVersion: 'TLSv1.3', requestCert: mutual, rejectUnauthorized: false });
    h2.on('stream', (stream) => {
      const parts: Buffer[] = [];
      stream.on('data', (d: Buffer) => parts.push(d));
      stream.on('end', () => {
        stream.respond({ ':status': 200 });
        stream.end(Buffer.concat(parts));
      });
    });
    await new Promise<void>((resolve) => h2.listen(0, '127.0.0.1', resolve));
    return `https://127.0.0.1:${(h2.address() as AddressInfo).port}`;
  };
  const addresses: Addresses = {
    agentlink,
    rawWss: await wsServer(false),
    rawWssMutual: await wsServer(true),
    rawHttp2: await h2Server(false),
    rawHttp2Mutual: await h2Server(true),
  };
  process.send!(addresses);
  // CPU this process used so far (µs), asked for around each subject's samples; or a profile started or stopped.
  process.on('message', (message: string) => {
    if (message === 'cpu') {
      const usage = process.cpuUsage();
      return process.send!(usage.user + usage.system);
    }
    const [command, file] = message.split(' ');
    void (command === 'profile-start' ? startProfile() : stopProfile(file!)).then(() => process.send!(0));
  });
  process.on('disconnect', () => process.exit(0));
}

function rawWs(name: string, url: string, clientTls?: { key: string; cert: string }): Subject {
  // A mutual client's context is made once, as agentlink's is.
  const secureContext = clientTls ? createSecureContext({ key: clientTls.key, cert: clientTls.cert, minVersion: 'TLSv1.3' }) : undefined;
  return {
    name,
    async once() {
      const ws = new WebSocket(url, { rejectUnauthorized: false, perMessageDeflate: false, ...(secureContext ? { secureContext } : {}) } as object);
      await once(ws, 'open');
      const reply = once(ws, 'message');
      ws.send(Buffer.alloc(1));
      await reply;
      return async () => ws.terminate();
    },
  };
}

function rawHttp2(name: string, url: string, clientTls?: { key: string; cert: string }): Subject {
  const secureContext = clientTls ? createSecureContext({ key: clientTls.key, cert: clientTls.cert, minVersion: 'TLSv1.3' }) : undefined;
  return {
    name,
    async once() {
      const session: ClientHttp2Session = connectHttp2(url, { rejectUnauthorized: false, minVersion: 'TLSv1.3', ...(secureContext ? { secureContext } : {}) });
      await once(session, 'connect');
      await new Promise<void>((resolve, reject) => {
        const stream = session.request({ ':path': '/echo', ':method': 'POST' });
        stream.on('data', () => undefined);
        stream.on('end', resolve);
        stream.on('error', reject);
        stream.end(Buffer.alloc(1));
      });
      return async () => session.destroy();
    },
  };
}

async function agentlink(name: string, address: string, build: Build, transport: 'ws' | 'http2'): Promise<Subject> {
  const agent = await build.createAgent({ channels: [transport === 'ws' ? build.webSocket() : build.http2()] });
  return {
    name,
    async once() {
      await agent.send(address, 'echo', Buffer.alloc(1));
      return async () => void (await Promise.all(agent.channels().map((channel) => channel.close())));
    },
  };
}

interface Measured {
  names: string[];
  samples: Record<string, number[]>;
  /** CPU µs of all samples, per subject. */
  cpu: Record<string, { client: number; server: number }>;
}

const options = {
  rounds: { type: 'string', default: '40' },
  warmup: { type: 'string', default: '5' },
  repeat: { type: 'string', default: '1' },
  only: { type: 'string' },
  profile: { type: 'string' },
  builds: { type: 'string', default: '' },
  child: { type: 'boolean', default: false },
} as const;

async function main(): Promise<void> {
  const { values } = parseArgs({ options });
  const repeat = Number(values.repeat);
  if (values.child) {
    const measured = await measure();
    process.send!(measured, () => process.exit(0));
    return;
  }
  let measured: Measured | undefined;
  if (repeat === 1) measured = await measure();
  else {
    // Fresh processes each time (both sides): with --warmup 0 every sample is a first few connections of a process,
    // its dial path as cold as an agent that just started (what agentbench's connect samples are).
    const args = process.argv.slice(2).filter((arg, i, all) => arg !== '--repeat' && all[i - 1] !== '--repeat');
    for (let r = 0; r < repeat; r++) {
      const child = fork(script, [...args, '--child'], { execArgv: process.execArgv });
      const [part] = (await once(child, 'message')) as [Measured];
      if (!measured) measured = part;
      else {
        for (const name of part.names) {
          measured.samples[name]!.push(...part.samples[name]!);
          measured.cpu[name]!.client += part.cpu[name]!.client;
          measured.cpu[name]!.server += part.cpu[name]!.server;
        }
      }
    }
  }
  report(measured!, `${values.rounds} interleaved rounds${repeat > 1 ? ` in each of ${repeat} fresh process pairs` : ''}, ${values.warmup} warm-up rounds`);
  process.exit(0);
}

async function measure(): Promise<Measured> {
  const { values } = parseArgs({ options });
  const rounds = Number(values.rounds);
  const builds = values.builds!.split(',').map((b) => b.trim());
  const server = fork(script, ['serve', ...builds], { execArgv: process.execArgv });
  const [addresses] = (await once(server, 'message')) as [Addresses];
  const clientTls = selfSignedCertificate(Identity.generate());
  const agentlinkSubjects = async (transport: 'ws' | 'http2'): Promise<Subject[]> => {
    const subjects: Subject[] = [];
    for (const name of builds) {
      const label = `agentlink ${transport}${name === '' ? '' : ` [${name}]`}`;
      subjects.push(await agentlink(label, addresses.agentlink[name]![transport], await loadBuild(name), transport));
    }
    return subjects;
  };
  const all: Subject[] = [
    rawWs('raw ws (TLS)', addresses.rawWss),
    rawWs('raw ws (mutual TLS)', addresses.rawWssMutual, clientTls),
    ...(await agentlinkSubjects('ws')),
    rawHttp2('raw http2 (TLS)', addresses.rawHttp2),
    rawHttp2('raw http2 (mutual TLS)', addresses.rawHttp2Mutual, clientTls),
    ...(await agentlinkSubjects('http2')),
  ];
  const only = values.only?.split(',').map((s) => s.trim());
  const subjects = only ? all.filter((s) => only.some((o) => s.name === o || s.name.startsWith(`${o} [`))) : all;
  // Warm-up: the JIT and both processes' first connections, not measured.
  for (let i = 0; i < Number(values.warmup); i++) for (const subject of subjects) await (await subject.once())();
  const ask = async (message: string): Promise<void> => {
    server.send(message);
    await once(server, 'message');
  };
  if (values.profile) await Promise.all([startProfile(), ask('profile-start')]);
  const samples: Measured['samples'] = Object.fromEntries(subjects.map((s) => [s.name, []]));
  const cpu: Measured['cpu'] = Object.fromEntries(subjects.map((s) => [s.name, { client: 0, server: 0 }]));
  const serverCpu = async (): Promise<number> => {
    server.send('cpu');
    const [value] = (await once(server, 'message')) as [number];
    return value;
  };
  for (let round = 0; round < rounds; round++) {
    // Each round starts with the next subject: none always follows the same one.
    for (let turn = 0; turn < subjects.length; turn++) {
      const subject = subjects[(round + turn) % subjects.length]!;
      const serverBefore = await serverCpu();
      const clientBefore = process.cpuUsage();
      const start = performance.now();
      const close = await subject.once();
      samples[subject.name]!.push(performance.now() - start);
      await close();
      const clientUsed = process.cpuUsage(clientBefore);
      const serverUsed = (await serverCpu()) - serverBefore;
      const total = cpu[subject.name]!;
      total.client += clientUsed.user + clientUsed.system;
      total.server += serverUsed;
    }
  }
  if (values.profile) await Promise.all([stopProfile(`${values.profile}.client.cpuprofile`), ask(`profile-stop ${values.profile}.server.cpuprofile`)]);
  server.disconnect();
  return { names: subjects.map((subject) => subject.name), samples, cpu };
}

function report({ names, samples, cpu }: Measured, what: string): void {
  const quartile = (values: number[], q: number): number => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) * q)]!;
  console.log(`connect + 1-byte call, ${what}, Node ${process.version}, load ${loadAverage()}`);
  console.log('| subject | median ms | p25–p75 ms | CPU ms per sample (close included), client + server | ratio (median of per-round ratios) |');
  console.log('|---|---|---|---|---|');
  for (const name of names) {
    const own = samples[name]!;
    const kind = name.includes('ws') ? 'ws' : 'http2';
    const firstBuild = names.find((n) => n.startsWith(`agentlink ${kind}`))!;
    const ratios = name.startsWith('agentlink')
      ? names
          .filter((n) => (n.startsWith('raw') && n.includes(kind)) || (n === firstBuild && n !== name))
          .map((other) => `${median(own.map((v, i) => v / samples[other]![i]!)).toFixed(2)}× ${other}`)
          .join(', ')
      : '';
    const used = cpu[name]!;
    const perSample = (us: number): string => (us / 1000 / own.length).toFixed(2);
    console.log(`| ${name} | ${median(own).toFixed(2)} | ${quartile(own, 0.25).toFixed(2)}–${quartile(own, 0.75).toFixed(2)} | ${perSample(used.client)} + ${perSample(used.server)} | ${ratios} |`);
  }
}

function loadAverage(): string {
  return loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');
}

const inspector = new Session();
/** Starts V8's sampling profiler in this process (100 µs interval): `--profile` covers the measured rounds only. */
async function startProfile(): Promise<void> {
  inspector.connect();
  await inspector.post('Profiler.enable');
  await inspector.post('Profiler.setSamplingInterval', { interval: 100 });
  await inspector.post('Profiler.start');
}

async function stopProfile(file: string): Promise<void> {
  const { profile } = await inspector.post('Profiler.stop');
  writeFileSync(file, JSON.stringify(profile));
  inspector.disconnect();
}

if (process.argv[2] === 'serve') void serve(process.argv.slice(3));
else void main();
