/**
 * Where a streamed call's first item spends its time, against a unary call's round trip, caller and handler in two
 * processes (as in agentbench). Both processes note, on one clock (performance.timeOrigin + now()), when bytes
 * reach their TLS socket (`tls.TLSSocket` push) and leave it (its `_writeGeneric`: the socket's handle takes them),
 * when the mux takes a frame in (`MuxedChannel.receive`) and hands one out (`sendData`), and when the handler
 * starts; the caller notes its call and its first item (the `for await` body, or `send` resolving). Each call's
 * steps are printed as medians over rounds, in µs from the call, streamed and unary side by side, so the step
 * where the streamed call loses its time shows.
 *
 *   pnpm build && pnpm --filter @agentlink/benchmarks ttft-path [--channel ws] [--rounds 200] [--tokens 1000] [--pin]
 *     [--body agentbench|map|bin]
 *
 * ws only for the socket marks (node:http2 reads and writes its socket in C++: on http2 the socket columns are
 * empty). `--pin`: the serving process runs on CPU 1 and the caller on CPU 0 (taskset).
 */
import { execFileSync, fork } from 'node:child_process';
import { once } from 'node:events';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    channel: { type: 'string', default: 'ws' },
    rounds: { type: 'string', default: '200' },
    tokens: { type: 'string', default: '1000' },
    pin: { type: 'boolean', default: false },
    body: { type: 'string', default: 'agentbench' },
  },
});
/**
 * The calls' bodies. `agentbench`: as agentbench's (a 1 KB binary echo; the burst asked for by an object, `{ total,
 * chunk, delayMs }`). `map`: both asked for by that object (the unary reply a 16-byte token). `bin`: both binary
 * (the 1 KB echo; the burst's count in 4 bytes).
 */
const BODY = args.body as 'agentbench' | 'map' | 'bin';
const TOKENS = Number(args.tokens);
const now = (): number => performance.timeOrigin + performance.now();

type Mark = [name: string, at: number];
const marks: Mark[] = [];
const mark = (name: string): void => {
  marks.push([name, now()]);
};

/** The marks at the TLS socket and the mux, in whichever process this runs. */
async function hook(): Promise<void> {
  // A probe build of core may call this at steps of its own (a copy with marks added: nothing in the sources does).
  (globalThis as { __ttftMark?: (name: string) => void }).__ttftMark = mark;
  const socketProto = tls.TLSSocket.prototype as unknown as Record<string, (...a: unknown[]) => unknown>;
  const push = socketProto.push!;
  socketProto.push = function (this: unknown, chunk: unknown, ...rest: unknown[]) {
    if (chunk !== null) mark('socket in');
    return push.call(this, chunk, ...rest);
  };
  const writeGeneric = socketProto._writeGeneric!;
  socketProto._writeGeneric = function (this: unknown, ...a: unknown[]) {
    mark('socket out');
    return writeGeneric.apply(this, a);
  };
  const { MuxedChannel } = await import('@agentlink/core/transport');
  const muxProto = MuxedChannel.prototype as unknown as Record<string, (...a: unknown[]) => unknown>;
  const receive = muxProto.receive!;
  muxProto.receive = function (this: unknown, message: unknown) {
    mark('mux in');
    return receive.call(this, message);
  };
  const sendData = muxProto.sendData!;
  muxProto.sendData = function (this: unknown, ...a: unknown[]) {
    mark('mux out');
    return sendData.apply(this, a);
  };
}

function pin(cpu: number): void {
  execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(process.pid)], { stdio: 'ignore' });
}

async function transport(listen: boolean): Promise<unknown> {
  const options = listen ? { port: 0 } : {};
  if (args.channel === 'http2') return (await import('@agentlink/http2')).http2(options);
  return (await import('@agentlink/ws')).webSocket(options);
}

async function serve(): Promise<void> {
  if (args.pin) pin(1);
  await hook();
  const { createAgent } = await import('@agentlink/core');
  const agent = await createAgent({ channels: [(await transport(true)) as never] });
  const token = Buffer.alloc(16, 7);
  agent.handle('echo', (body: unknown) => {
    mark('handler');
    return body instanceof Uint8Array ? body : token;
  });
  agent.handleStream('burst', async function* (request: { total: number; chunk: number } | Buffer) {
    mark('handler');
    const count = Buffer.isBuffer(request) ? request.readUInt32BE(0) : request.total / request.chunk;
    for (let i = 0; i < count; i++) yield token;
  });
  process.on('message', () => {
    process.send!(marks.splice(0));
  });
  process.send!(agent.addresses[0]);
}

const CALLER_STEPS = ['mux out', 'socket out'];
const SERVER_STEPS = ['socket in', 'mux in', 'handler', 'mux out', 'socket out'];
const BACK_STEPS = ['socket in', 'mux in'];

async function measure(): Promise<void> {
  if (args.pin) pin(0);
  await hook();
  const server = fork(fileURLToPath(import.meta.url), ['serve', ...process.argv.slice(2)], { execArgv: process.execArgv });
  const [address] = (await once(server, 'message')) as [string];
  const { createAgent } = await import('@agentlink/core');
  const agent = await createAgent({ channels: [(await transport(false)) as never] });
  const payload = Buffer.alloc(1024, 5);
  const serverMarks = async (): Promise<Mark[]> => {
    const reply = once(server, 'message');
    server.send('marks');
    return ((await reply) as [Mark[]])[0];
  };

  /** One call's steps in µs from its start: the caller's, the handler process's, the caller's again, the item. */
  const steps = async (run: () => Promise<void>): Promise<number[]> => {
    await serverMarks(); // drops what the last call left
    marks.length = 0;
    const started = now();
    let first = 0;
    await run().then(undefined, (error: unknown) => {
      throw error;
    });
    first = firstItem;
    const own = marks.splice(0);
    const theirs = await serverMarks();
    const at = (list: Mark[], name: string, after: number): number => list.find(([n, t]) => n === name && t >= after)?.[1] ?? Number.NaN;
    const row: number[] = [];
    let t = started;
    for (const name of CALLER_STEPS) row.push((t = at(own, name, started)));
    const sent = t;
    for (const name of SERVER_STEPS) row.push((t = at(theirs, name, name === 'socket in' ? sent - 0.05 : t)));
    for (const name of BACK_STEPS) row.push((t = at(own, name, t)));
    row.push(first);
    // Every other mark (a probe build's), first occurrence after the call started, by side.
    const extra = new Map<string, number>();
    for (const [side, list] of [['caller', own], ["handler's", theirs]] as const) {
      for (const [name, when] of list) {
        const key = `${side} ${name}`;
        if (when >= started - 0.05 && !extra.has(key)) extra.set(key, (when - started) * 1000);
      }
    }
    extraRows.push(extra);
    return row.map((x) => (x - started) * 1000);
  };
  let extraRows: Array<Map<string, number>> = [];
  const extras: Record<'unary' | 'stream', Array<Map<string, number>>> = { unary: [], stream: [] };
  let firstItem = 0;
  const mapRequest = { total: TOKENS * 16, chunk: 16, delayMs: 0 };
  const binRequest = Buffer.alloc(4);
  binRequest.writeUInt32BE(TOKENS, 0);
  const unaryBody = BODY === 'map' ? mapRequest : payload;
  const streamBody = BODY === 'bin' ? binRequest : mapRequest;
  const unary = async (): Promise<void> => {
    await agent.send(address, 'echo', unaryBody);
    firstItem = now();
  };
  const streamed = async (): Promise<void> => {
    firstItem = 0;
    for await (const _ of agent.stream(address, 'burst', streamBody)) if (firstItem === 0) firstItem = now();
  };

  const rows: { unary: number[][]; stream: number[][] } = { unary: [], stream: [] };
  const rounds = Number(args.rounds);
  for (let round = -20; round < rounds; round++) {
    // As agentbench does: echoes, then a burst; every round.
    for (let i = 0; i < 5; i++) {
      extraRows = [];
      const row = await steps(unary);
      if (round >= 0 && i === 4) {
        rows.unary.push(row);
        extras.unary.push(...extraRows);
      }
    }
    extraRows = [];
    const row = await steps(streamed);
    if (round >= 0) {
      rows.stream.push(row);
      extras.stream.push(...extraRows);
    }
  }
  const names = [...CALLER_STEPS.map((n) => `caller ${n}`), ...SERVER_STEPS.map((n) => `handler's ${n}`), ...BACK_STEPS.map((n) => `caller ${n}`), 'caller has it'];
  const median = (values: number[]): number => {
    const sorted = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
    return sorted[sorted.length >> 1] ?? Number.NaN;
  };
  console.log(`${args.channel}, bodies ${BODY}, ${rounds} rounds${args.pin ? ' (pinned)' : ''}: µs from the call (median), and the step's own µs (median of per-call differences)`);
  console.log('| step | unary | its step | streamed (#0) | its step | streamed − unary, step |');
  console.log('|---|---|---|---|---|---|');
  const stepOf = (list: number[][], k: number): number => median(list.map((r) => (k === 0 ? r[0]! : r[k]! - r[k - 1]!)));
  for (const [k, name] of names.entries()) {
    const u = median(rows.unary.map((r) => r[k]!));
    const s = median(rows.stream.map((r) => r[k]!));
    const us = stepOf(rows.unary, k);
    const ss = stepOf(rows.stream, k);
    console.log(`| ${name} | ${u.toFixed(1)} | ${us.toFixed(1)} | ${s.toFixed(1)} | ${ss.toFixed(1)} | ${(ss - us).toFixed(1)} |`);
  }
  // Every mark by its median time in the streamed call (a probe build's steps among them).
  const keys = new Set([...extras.unary, ...extras.stream].flatMap((m) => [...m.keys()]));
  const at = (list: Array<Map<string, number>>, key: string): number => median(list.map((m) => m.get(key) ?? Number.NaN));
  const ordered = [...keys].sort((a, b) => (at(extras.stream, a) || at(extras.unary, a)) - (at(extras.stream, b) || at(extras.unary, b)));
  console.log('\n| mark (first after the call) | unary µs | streamed µs |\n|---|---|---|');
  for (const key of ordered) console.log(`| ${key} | ${at(extras.unary, key).toFixed(1)} | ${at(extras.stream, key).toFixed(1)} |`);
  await agent.close();
  server.kill();
}

if (positionals[0] === 'serve') await serve();
else await measure();
