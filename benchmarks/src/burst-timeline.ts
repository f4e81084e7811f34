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
 * channel's time to first token shows beside it.
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { readAll, requestBurst, serveStreams } from './native-read.js';

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
const root = fileURLToPath(new URL('../../', import.meta.url));
const now = (): number => performance.timeOrigin + performance.now();

async function load(build: string, pkg: string): Promise<Record<string, any>> {
  if (build === 'current') return import(`@agentlink/${pkg}`);
  return import(join(root, 'benchmarks/.builds', build, 'node_modules/@agentlink', pkg, 'dist/index.js'));
}

async function transports(build: string, channels: string[], listen: boolean): Promise<unknown[]> {
  const options = listen ? { port: 0 } : {};
  channels = channels.filter((channel) => channel !== 'rawquic');
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
  agent.handleStream('burst', async function* ({ count }: { count: number }) {
    const token = Buffer.alloc(TOKEN_BYTES, 7);
    const marks = [now()];
    for (let i = 0; i < count; i++) {
      yield token;
      if (i < 3 || i === count >> 1 || i === count - 1) marks.push(now());
    }
    process.send!(marks);
  });
  // The agent's addresses come in the order of its channels (every channel but rawquic).
  const own = [...agent.addresses] as string[];
  const addresses: string[] = [];
  for (const channel of channels) addresses.push(channel === 'rawquic' ? await serveRawQuic(build, Identity) : own.shift()!);
  process.send!(addresses);
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

/** The raw engine's caller, as agentbench's subject: pull reads, the tokens counted by bytes. */
async function rawQuicClient(build: string, address: string): Promise<{ burst(count: number): AsyncIterable<Buffer>; close(): Promise<void> }> {
  const { loadNative } = await load(build, 'quic');
  const { Identity, publicKeyFromAgentId } = await load(build, 'core');
  const { selfSignedCertificate } = await import(join(root, 'packages/core/dist/transport.js'));
  const binding = loadNative().binding;
  const [port, key] = address.split(':') as [string, string];
  const tls = selfSignedCertificate(Identity.generate());
  const endpoint = await binding.bindEndpoint({ host: '127.0.0.1', port: 0, cert: tls.certDer, key: tls.keyDer, accept: false });
  const connection = await endpoint.dial('127.0.0.1', Number(port), Buffer.from(publicKeyFromAgentId(key)), 5000).connection();
  return {
    async *burst(count: number) {
      const stream = await requestBurst(connection, count);
      for (;;) {
        const data: Buffer | null = stream.tryRead(1 << 20) ?? (await stream.read(1 << 20));
        if (!data || data.length === 0) break;
        for (let at = 0; at < data.length; at += TOKEN_BYTES) yield data.subarray(at, at + TOKEN_BYTES);
      }
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
  client: any;
  server: ChildProcess;
  caller: number[][];
  handler: number[][];
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
      const client =
        channel === 'rawquic'
          ? await rawQuicClient(build, addresses[i]!)
          : { burst: (count: number) => agent.stream(addresses[i]!, 'burst', { count }), close: () => agent.close() };
      subjects.push({ build, channel, address: addresses[i]!, client, server, caller: [], handler: [] });
    }
  }
  const rounds = Number(args.rounds);
  for (let round = 0; round < rounds; round++) {
    for (const subject of round % 2 === 0 ? subjects : [...subjects].reverse()) {
      const handlerMarks = once(subject.server, 'message');
      const started = now();
      const marks: number[] = [];
      let i = 0;
      for await (const _token of subject.client.burst(TOKENS)) {
        if (i < 3 || i === TOKENS >> 1 || i === TOKENS - 1) marks.push(now() - started);
        i++;
      }
      marks.push(now() - started); // the caller's loop has ended (agentbench's per-token figure ends here)
      const [handler] = (await handlerMarks) as [number[]];
      if (round > 0) {
        // The first round warms each subject up (JIT, the channel's first dial).
        subject.caller.push(marks);
        subject.handler.push(handler.map((t) => t - started));
      }
    }
  }
  const median = (values: number[]): number => [...values].sort((a, b) => a - b)[values.length >> 1]!;
  const column = (rows: number[][], k: number): string => median(rows.map((row) => row[k]!)).toFixed(2);
  const half = TOKENS >> 1;
  console.log(`${TOKENS} tokens of ${TOKEN_BYTES} bytes, two processes${args.pin ? ' (pinned: handler CPU 1, caller CPU 0)' : ''}${pinLoops !== undefined ? ` (event loops pinned: caller's CPU 0, handler's CPU ${pinLoops === 'same' ? 0 : 1})` : ''}; ms from the call, medians of ${rounds - 1} rounds`);
  console.log(`| build | channel | handler starts | #0 yielded | caller has #0 | #1 | #2 | #${half} yielded | caller has #${half} | last yielded | caller has the last | loop ended | µs per token (#0 to loop end) |`);
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const s of subjects) {
    const h = (k: number): string => column(s.handler, k);
    const c = (k: number): string => column(s.caller, k);
    const perToken = median(s.caller.map((row) => ((row[5]! - row[0]!) * 1000) / (TOKENS - 1))).toFixed(2);
    console.log(`| ${s.build} | ${s.channel} | ${h(0)} | ${h(1)} | ${c(0)} | ${c(1)} | ${c(2)} | ${h(4)} | ${c(3)} | ${h(5)} | ${c(4)} | ${c(5)} | ${perToken} |`);
  }
  await Promise.all(subjects.map((s) => s.client.close().catch(() => undefined)));
  for (const s of subjects) s.server.kill();
}

if (positionals[0] === 'serve') await serve(positionals[1]!, positionals[2]!.split(','));
else await measure();
