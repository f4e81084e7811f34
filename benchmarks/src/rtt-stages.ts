/**
 * Where a sequential 1 KB round trip's time goes, caller and server in two processes (as agentbench runs them), per
 * stage, for raw ws, the least binary RPC over the same socket, and agentlink ws (the workspace's build, or builds
 * snapshotted with `ab-builds snapshot`). A diagnostic: it patches node's socket internals (`net.Socket#_writeGeneric`,
 * `TLSSocket#push`) in both processes to take timestamps from CLOCK_MONOTONIC (`process.hrtime.bigint`: one clock
 * for both processes) at:
 *   caller about to send → A → the request handed to the TLS socket → B → the server's TLS socket read it →
 *   C → the handler runs → D → the reply handed to the TLS socket → E → the caller's TLS socket read it → F →
 *   the caller's await resumed; S = the server's read → the end of its turn (a setImmediate queued at the read).
 * Subjects take turns in rounds; it prints the median of each stage over all calls, and each subject's RTT p50
 * × raw ws's, median of per-round ratios (as agentbench's interleaved table).
 *   pnpm --filter @agentlink/benchmarks rtt-stages [--rounds 10] [--calls 2000] [--builds base,after]
 *     [--mode stages|cpu|inflight|solo] [--in-flight 32] [--pin] [--no-deadline-too]
 * `--mode cpu`: CPU per call in each process (process.cpuUsage; the server's over IPC) instead of timestamps;
 * `--mode inflight`: calls/s with `--in-flight` calls in flight; `--mode solo --subject <index>`: one subject for 4 s
 * (to run under `perf sched record`); `--pin`: the caller on vCPU 0, the server on vCPU 1 (taskset);
 * `--no-deadline-too`: each agentlink build twice, the second time with `defaultTimeoutMs: Infinity`.
 */
import { execSync, fork } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadavg } from 'node:os';
import type { AddressInfo } from 'node:net';
import { Identity } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import { WebSocket, WebSocketServer } from 'ws';

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: { 'no-deadline-too': { type: 'boolean', default: false }, mode: { type: 'string', default: 'stages' }, subject: { type: 'string', default: '0' }, pin: { type: 'boolean', default: false }, 'in-flight': { type: 'string', default: '32' }, rounds: { type: 'string', default: '10' }, calls: { type: 'string', default: '2000' }, builds: { type: 'string', default: '' } },
});
const root = fileURLToPath(new URL('../../', import.meta.url));
const MAX = 1 << 20;

// ---- the probes ------------------------------------------------------------------------------------------
/** Per port (the subject's server port): events in order. */
const now = (): number => Number(process.hrtime.bigint());
const tag = Symbol('port');
type Log = { write: Float64Array; writes: number; data: Float64Array; datas: number; handler: Float64Array; handlers: number; done: Float64Array; dones: number };
const logs = new Map<number, Log>();
function logFor(port: number): Log {
  let log = logs.get(port);
  if (!log) {
    log = { write: new Float64Array(MAX), writes: 0, data: new Float64Array(MAX), datas: 0, handler: new Float64Array(MAX), handlers: 0, done: new Float64Array(MAX), dones: 0 };
    logs.set(port, log);
  }
  return log;
}
let isServer = false;
function portOf(socket: net.Socket): number {
  const s = socket as net.Socket & { [tag]?: number };
  return (s[tag] ??= isServer ? socket.localPort! : socket.remotePort!);
}
let probing = false;
const writeGeneric = (net.Socket.prototype as any)._writeGeneric;
(net.Socket.prototype as any)._writeGeneric = function (this: net.Socket, ...rest: unknown[]) {
  if (probing && this instanceof tls.TLSSocket) {
    const log = logFor(portOf(this));
    log.write[log.writes++ & (MAX - 1)] = now();
  }
  return writeGeneric.apply(this, rest);
};
const push = tls.TLSSocket.prototype.push;
tls.TLSSocket.prototype.push = function (this: tls.TLSSocket, chunk: unknown, encoding?: BufferEncoding) {
  if (probing && chunk) {
    const log = logFor(portOf(this));
    log.data[log.datas++ & (MAX - 1)] = now();
    // The end of the turn this read starts: after its ticks and microtasks (setImmediate runs after the poll phase).
    if (isServer) {
      const l = log;
      setImmediate(() => (l.done[l.dones++ & (MAX - 1)] = now()));
    }
  }
  return push.call(this, chunk, encoding);
};
const handled = (port: number): void => {
  if (!probing) return;
  const log = logFor(port);
  log.handler[log.handlers++ & (MAX - 1)] = now();
};

// ---- the subjects ----------------------------------------------------------------------------------------
interface Caller {
  name: string;
  port: number;
  call(): Promise<unknown>;
}
const payload = Buffer.alloc(1024, 5);
const builds = args.builds ? args.builds.split(',') : [];

async function loadBuild(name: string | undefined): Promise<{ core: any; ws: any }> {
  if (!name) return { core: await import('@agentlink/core'), ws: await import('@agentlink/ws') };
  const modules = join(root, 'benchmarks/.builds', name, 'node_modules/@agentlink');
  return { core: await import(join(modules, 'core/dist/index.js')), ws: await import(join(modules, 'ws/dist/index.js')) };
}

async function serve(): Promise<void> {
  isServer = true;
  const out: Record<string, unknown> = {};
  const identity = Identity.generate();
  const cert = selfSignedCertificate(identity);
  // raw ws echo, as agentbench's server
  const https = createServer({ key: cert.key, cert: cert.cert, minVersion: 'TLSv1.3' });
  const wss = new WebSocketServer({ server: https, perMessageDeflate: false });
  await new Promise<void>((r) => https.listen(0, '127.0.0.1', r));
  const rawPort = (https.address() as AddressInfo).port;
  wss.on('connection', (ws) => ws.on('message', (data: Buffer) => (handled(rawPort), ws.send(data))));
  out.raw = rawPort;
  // binary RPC over ws: u32 id, f64 deadline, u8 method length, method, body → u32 id, u8 ok, body
  const https2 = createServer({ key: cert.key, cert: cert.cert, minVersion: 'TLSv1.3' });
  const wss2 = new WebSocketServer({ server: https2, perMessageDeflate: false });
  await new Promise<void>((r) => https2.listen(0, '127.0.0.1', r));
  const rpcPort = (https2.address() as AddressInfo).port;
  const handlers = new Map<string, (body: Buffer) => Buffer>([['echo', (body) => (handled(rpcPort), body)]]);
  wss2.on('connection', (ws) =>
    ws.on('message', (data: Buffer) => {
      const length = data[12]!;
      let method = '';
      for (let i = 0; i < length; i++) method += String.fromCharCode(data[13 + i]!);
      const handler = handlers.get(method);
      const body = data.subarray(13 + length);
      const deadline = data.readDoubleBE(4);
      const ok = handler !== undefined && Date.now() <= deadline;
      const reply = ok ? handler(body) : Buffer.alloc(0);
      const bytes = Buffer.allocUnsafe(5 + reply.length);
      bytes.writeUInt32BE(data.readUInt32BE(0), 0);
      bytes[4] = ok ? 1 : 0;
      bytes.set(reply, 5);
      ws.send(bytes);
    }),
  );
  out.rpc = rpcPort;
  out.agentlink = [];
  for (const build of builds.length ? builds : [undefined]) {
    for (const noDeadline of args['no-deadline-too'] ? [false, true] : [false]) {
      const { core, ws } = await loadBuild(build);
      const agent = await core.createAgent({ channels: [ws.webSocket({ port: 0, host: '127.0.0.1' })] });
      const address: string = agent.addresses[0];
      const port = Number(new URL(address.slice(address.indexOf('@') + 1)).port);
      agent.handle('echo', (body: unknown) => (handled(port), body));
      (out.agentlink as unknown[]).push({ build: build ?? 'workspace', address, port, noDeadline });
    }
  }
  process.send!({ ready: out });
  process.on('message', (m: any) => {
    if (m === 'start') probing = true;
    if (m === 'cpu') {
      const u = process.cpuUsage();
      process.send!({ cpu: u.user + u.system });
    }
    if (m === 'dump') {
      const dump: Record<number, unknown> = {};
      for (const [port, log] of logs) dump[port] = { write: Array.from(log.write.subarray(0, log.writes)), data: Array.from(log.data.subarray(0, log.datas)), handler: Array.from(log.handler.subarray(0, log.handlers)), done: Array.from(log.done.subarray(0, log.dones)) };
      process.send!({ dump });
    }
  });
}

async function main(): Promise<void> {
  const child = fork(fileURLToPath(import.meta.url), ['serve', ...(args.builds ? ['--builds', args.builds] : []), ...(args['no-deadline-too'] ? ['--no-deadline-too'] : [])], { execArgv: process.execArgv });
  if (args.pin) {
    execSync(`taskset -a -p -c 1 ${child.pid}`);
    execSync(`taskset -a -p -c 0 ${process.pid}`);
  }
  const [ready] = (await once(child, 'message')) as [{ ready: any }];
  const s = ready.ready;
  const callers: Caller[] = [];
  // raw ws
  {
    const ws = new WebSocket(`wss://127.0.0.1:${s.raw}`, { rejectUnauthorized: false, perMessageDeflate: false });
    await once(ws, 'open');
    const waiting: Array<() => void> = [];
    ws.on('message', () => waiting.shift()!());
    callers.push({ name: 'raw ws', port: s.raw, call: () => new Promise<void>((resolve) => (waiting.push(resolve), ws.send(payload))) });
  }
  // binary RPC over ws (the floor), as msgpack-rpc-ws.ts's binary codec: ids, a Map, a deadline timer per call
  {
    const ws = new WebSocket(`wss://127.0.0.1:${s.rpc}`, { rejectUnauthorized: false, perMessageDeflate: false });
    await once(ws, 'open');
    const pending = new Map<number, { resolve(b: Buffer): void; reject(e: Error): void; timer: NodeJS.Timeout }>();
    let nextId = 0;
    ws.on('message', (data: Buffer) => {
      const id = data.readUInt32BE(0);
      const call = pending.get(id);
      if (!call) return;
      pending.delete(id);
      clearTimeout(call.timer);
      if (data[4] === 1) call.resolve(data.subarray(5));
      else call.reject(new Error('failed'));
    });
    const send = (method: string, body: Buffer): Promise<Buffer> =>
      new Promise((resolve, reject) => {
        const id = ++nextId;
        const timer = setTimeout(() => (pending.delete(id), reject(new Error('deadline'))), 30_000);
        pending.set(id, { resolve, reject, timer });
        const out = Buffer.allocUnsafe(13 + method.length + body.length);
        out.writeUInt32BE(id, 0);
        out.writeDoubleBE(Date.now() + 30_000, 4);
        out[12] = method.length;
        for (let i = 0; i < method.length; i++) out[13 + i] = method.charCodeAt(i);
        out.set(body, 13 + method.length);
        ws.send(out);
      });
    callers.push({ name: 'binary RPC', port: s.rpc, call: () => send('echo', payload) });
  }
  for (const a of s.agentlink) {
    const { core, ws } = await loadBuild(a.build === 'workspace' ? undefined : a.build);
    // `--no-deadline-too`: the same build again, its calls without a deadline (no timer armed and cleared per call).
    const client = await core.createAgent({ channels: [ws.webSocket()], ...(a.noDeadline ? { defaultTimeoutMs: Infinity } : {}) });
    await client.ping(a.address);
    callers.push({ name: `agentlink ws (${a.build}${a.noDeadline ? ', no deadline' : ''})`, port: a.port, call: () => client.send(a.address, 'echo', payload) });
  }
  const rounds = Number(args.rounds);
  const calls = Number(args.calls);
  // warm-up
  for (const c of callers) for (let i = 0; i < calls; i++) await c.call();
  if (args.mode === 'cpu') {
    const serverCpu = async (): Promise<number> => {
      child.send('cpu');
      const [m] = (await once(child, 'message')) as [{ cpu: number }];
      return m.cpu;
    };
    const rows = callers.map(() => ({ client: [] as number[], server: [] as number[], wall: [] as number[] }));
    const load0 = loadavg()[0]!;
    for (let round = 0; round < rounds; round++) {
      for (let t = 0; t < callers.length; t++) {
        const index = (round + t) % callers.length;
        const c = callers[index]!;
        const s0 = await serverCpu();
        const c0 = process.cpuUsage();
        const w0 = performance.now();
        for (let i = 0; i < calls; i++) await c.call();
        const w1 = performance.now();
        const cu = process.cpuUsage(c0);
        const s1 = await serverCpu();
        rows[index]!.client.push((cu.user + cu.system) / calls);
        rows[index]!.server.push((s1 - s0) / calls);
        rows[index]!.wall.push(((w1 - w0) * 1000) / calls);
      }
    }
    const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    console.log(`CPU per sequential call, two processes; ${rounds} rounds × ${calls}; load ${load0.toFixed(2)} → ${loadavg()[0]!.toFixed(2)}`);
    console.log('| subject | caller CPU µs | server CPU µs | both | wall µs (mean) | both × raw | wall × raw |');
    for (const [i, c] of callers.entries()) {
      const r = rows[i]!;
      const both = r.client.map((x, k) => x + r.server[k]!);
      const bothRaw = rows[0]!.client.map((x, k) => x + rows[0]!.server[k]!);
      const br = both.map((x, k) => x / bothRaw[k]!);
      const wr = r.wall.map((x, k) => x / rows[0]!.wall[k]!);
      console.log(`| ${c.name} | ${med(r.client).toFixed(1)} | ${med(r.server).toFixed(1)} | ${med(both).toFixed(1)} | ${med(r.wall).toFixed(1)} | ${med(br).toFixed(3)} | ${med(wr).toFixed(3)} |`);
    }
    child.kill();
    process.exit(0);
  }
  if (args.mode === 'solo') {
    const c = callers[Number(args.subject)]!;
    const until = performance.now() + 4000;
    let n = 0;
    const t0 = performance.now();
    console.log(`solo ${c.name} server pid ${child.pid} client pid ${process.pid}`);
    while (performance.now() < until) {
      for (let i = 0; i < 1000; i++) await c.call();
      n += 1000;
    }
    console.log(`solo ${c.name}: ${((performance.now() - t0) * 1000 / n).toFixed(1)} µs per call (mean)`);
    child.kill();
    process.exit(0);
  }
  const inFlight = Number(args['in-flight']);
  if (args.mode === 'inflight') {
    const rates = callers.map(() => [] as number[]);
    const load0 = loadavg()[0]!;
    for (let round = 0; round < rounds; round++) {
      for (let t = 0; t < callers.length; t++) {
        const index = (round + t) % callers.length;
        const c = callers[index]!;
        let next = 0;
        const started = performance.now();
        await Promise.all(Array.from({ length: inFlight }, async () => {
          while (next++ < calls) await c.call();
        }));
        rates[index]!.push(calls / ((performance.now() - started) / 1000));
      }
    }
    const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    console.log(`${inFlight} in flight, ${rounds} rounds × ${calls} calls; load ${load0.toFixed(2)} → ${loadavg()[0]!.toFixed(2)}`);
    for (const [i, c] of callers.entries()) {
      const r = rates[i]!.map((x, round) => x / rates[0]![round]!);
      console.log(`| ${c.name} | ${med(rates[i]!).toFixed(0)} calls/s | × raw ${med(r).toFixed(3)} (${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)}) |`);
    }
    child.kill();
    process.exit(0);
  }
  const starts = new Map<number, number[]>();
  const ends = new Map<number, number[]>();
  for (const c of callers) (starts.set(c.port, []), ends.set(c.port, []));
  child.send('start');
  probing = true;
  await new Promise((r) => setTimeout(r, 50));
  const load0 = loadavg()[0]!;
  for (let round = 0; round < rounds; round++) {
    for (let t = 0; t < callers.length; t++) {
      const c = callers[(round + t) % callers.length]!;
      const st = starts.get(c.port)!;
      const en = ends.get(c.port)!;
      for (let i = 0; i < calls; i++) {
        st.push(now());
        await c.call();
        en.push(now());
      }
    }
  }
  probing = false;
  child.send('dump');
  // Per round p50 of the RTT, × raw ws's of the same round (as agentbench's interleaved ratio).
  {
    const p50 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const perRound = (c: Caller): number[] => {
      const st = starts.get(c.port)!;
      const en = ends.get(c.port)!;
      return Array.from({ length: rounds }, (_, r) => p50(en.slice(r * calls, (r + 1) * calls).map((e, i) => e - st[r * calls + i]!)));
    };
    const raw = perRound(callers[0]!);
    for (const c of callers) {
      const mine = perRound(c);
      const ratios = mine.map((x, r) => x / raw[r]!);
      console.log(`RTT p50 ${c.name}: ${(p50(mine) / 1000).toFixed(1)} µs, × raw ${p50(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})`);
    }
  }
  const [dumpMsg] = (await once(child, 'message')) as [{ dump: Record<number, { write: number[]; data: number[]; handler: number[]; done: number[] }> }];
  const server = dumpMsg.dump;
  const med = (xs: number[]): number => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.floor(s.length / 2)]!;
  };
  console.log(`node ${process.version}; ${rounds} rounds × ${calls} sequential 1 KB calls per subject, interleaved; load ${load0.toFixed(2)} → ${loadavg()[0]!.toFixed(2)}`);
  console.log('µs, medians over calls: A caller send→request write · B write→server data · C data→handler · D handler→reply write · E reply write→caller data · F caller data→await resumed · S server data→turn end (setImmediate) · RTT');
  console.log('| subject | A | B | C | D | E | F | S | RTT | n (writes c/s, datas c/s) |\n|---|---|---|---|---|---|---|---|---|---|');
  for (const c of callers) {
    const cl = logs.get(c.port)!;
    const sl = server[c.port]!;
    const st = starts.get(c.port)!;
    const en = ends.get(c.port)!;
    const n = st.length;
    const cw = Array.from(cl.write.subarray(0, cl.writes));
    const cd = Array.from(cl.data.subarray(0, cl.datas));
    // Match by order; report counts so a mismatch shows.
    const stage: number[][] = [[], [], [], [], [], [], [], []];
    const ok = cw.length === n && cd.length === n && sl.data.length === n && sl.write.length === n && sl.handler.length === n;
    if (ok) {
      for (let i = 0; i < n; i++) {
        stage[0]!.push(cw[i]! - st[i]!);
        stage[1]!.push(sl.data[i]! - cw[i]!);
        stage[2]!.push(sl.handler[i]! - sl.data[i]!);
        stage[3]!.push(sl.write[i]! - sl.handler[i]!);
        stage[4]!.push(cd[i]! - sl.write[i]!);
        stage[5]!.push(en[i]! - cd[i]!);
        stage[6]!.push(sl.done[i]! - sl.data[i]!);
        stage[7]!.push(en[i]! - st[i]!);
      }
    }
    const f = (xs: number[]): string => (xs.length ? (med(xs) / 1000).toFixed(1) : '–');
    console.log(`| ${c.name} | ${stage.map(f).join(' | ')} | ${n} (${cw.length}/${sl.write.length}, ${cd.length}/${sl.data.length}) |`);
  }
  child.kill();
  process.exit(0);
}

if (positionals[0] === 'serve') await serve();
else await main();
