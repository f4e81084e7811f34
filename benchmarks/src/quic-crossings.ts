/**
 * What one sequential 1 KB call does in the QUIC engine, counted: every call from JavaScript into the engine (by
 * method), every call back into JavaScript (a push-read batch, a settled async call), the voluntary context
 * switches of each thread (a thread that went to sleep and was woken: the engine's `agentlink-quic`, the event
 * loop's), and the datagrams each side sent (quinn's counters are not exposed; `strace -f -c -e sendmsg,recvmmsg`
 * gives the syscalls). Caller and handler share this process, as in call-cost, so the figures are both sides'.
 * Subjects: agentlink quic (createAgent, 'echo'), and the raw engine echo of call-cost (pull reads) and with push
 * reads. Usage: pnpm build && pnpm --filter @agentlink/benchmarks quic-crossings [--calls 2000] [--only <part>]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { createAgent, type Transport } from '@agentlink/core';
import { loadNative, quic } from '@agentlink/quic';
import { SHAPE_PAYLOAD } from './http2-shapes.js';
import { rawQuicEcho, type Echo } from './raw-echoes.js';

const { values: args } = parseArgs({ options: { calls: { type: 'string', default: '2000' }, only: { type: 'string' } } });
const CALLS = Number(args.calls);

const counts = new Map<string, number>();
const count = (name: string): void => void counts.set(name, (counts.get(name) ?? 0) + 1);
const patched = new WeakSet<object>();

/** Counts every method call on `value`'s prototype (once per class), and follows what they return. */
function instrument<T>(value: T): T {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    value.forEach((item: unknown) => instrument(item));
    return value;
  }
  if (value instanceof Promise || Buffer.isBuffer(value)) return value;
  const proto = Object.getPrototypeOf(value) as Record<string, unknown> | null;
  if (!proto || proto === Object.prototype || patched.has(proto)) {
    if (proto === Object.prototype) for (const v of Object.values(value as object)) instrument(v);
    return value;
  }
  patched.add(proto);
  const className = (proto.constructor as { name?: string } | undefined)?.name ?? '?';
  for (const name of Object.getOwnPropertyNames(proto)) {
    const descriptor = Object.getOwnPropertyDescriptor(proto, name);
    if (name === 'constructor' || !descriptor || typeof descriptor.value !== 'function') continue;
    const original = descriptor.value as (...a: unknown[]) => unknown;
    proto[name] = function (this: unknown, ...params: unknown[]): unknown {
      count(`${className}.${name}`);
      if (name === 'startReads' && typeof params[0] === 'function') {
        const onReady = params[0] as () => void;
        params[0] = () => {
          count('callback: reads ready');
          onReady();
        };
      }
      const result = original.apply(this, params);
      if (name === 'takeReads' && Array.isArray(result)) {
        for (const event of result as Array<{ data?: Buffer | null; fin: boolean; stream?: unknown; error?: string | null }>) {
          count(`read event: ${event.stream ? 'accepted stream' : event.error ? 'error' : event.data ? (event.fin ? 'bytes with the end' : 'bytes without the end') : 'the end alone'}`);
        }
      }
      if (result instanceof Promise) {
        return result.then((settled: unknown) => {
          count(`callback: ${className}.${name} settled`);
          return instrument(settled);
        });
      }
      return instrument(result);
    };
  }
  return value;
}

/** Voluntary context switches (went to sleep, was woken) of this process's threads, by thread name; and their CPU ticks. */
function switches(): Map<string, number> {
  const byName = new Map<string, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const name = /\((.*)\)/.exec(stat)?.[1] ?? '?';
      const key = `cpu ms ${tid === String(process.pid) ? 'event loop' : name}`;
      byName.set(key, (byName.get(key) ?? 0) + (Number(fields[11]) + Number(fields[12])) * 10);
    } catch {
      // the thread ended meanwhile
    }
  }
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const status = readFileSync(`/proc/self/task/${tid}/status`, 'utf8');
      const name = /^Name:\s*(.*)$/m.exec(status)?.[1] ?? '?';
      const voluntary = Number(/^voluntary_ctxt_switches:\s*(\d+)$/m.exec(status)?.[1] ?? 0);
      const key = tid === String(process.pid) ? 'event loop' : name;
      byName.set(key, (byName.get(key) ?? 0) + voluntary);
    } catch {
      // the thread ended meanwhile
    }
  }
  return byName;
}

const native = loadNative();
if (!native.ok) throw new Error(native.reason);
const binding = native.binding;
const bind = binding.bindEndpoint.bind(binding);
binding.bindEndpoint = async (options) => instrument(await bind(options));

async function agentlinkEcho(): Promise<Echo> {
  const factory = quic as (options?: { port: number; host: string }) => Transport;
  const server = await createAgent({ channels: [factory({ port: 0, host: '127.0.0.1' })] });
  server.handle('echo', (body: unknown) => body);
  const client = await createAgent({ channels: [factory()] });
  const address = server.addresses[0]!;
  await client.ping(address);
  return {
    call: async () => void (await client.send(address, 'echo', SHAPE_PAYLOAD)),
    close: async () => void (await Promise.all([client.close(), server.close()])),
  };
}

const subjects: Array<{ name: string; open: () => Promise<Echo> }> = [
  { name: 'agentlink quic', open: agentlinkEcho },
  { name: 'raw QUIC engine (pull reads)', open: () => rawQuicEcho(binding, SHAPE_PAYLOAD) },
  { name: 'raw QUIC engine (push reads)', open: () => rawQuicEcho(binding, SHAPE_PAYLOAD, { pushReads: true }) },
];
for (const subject of subjects.filter((s) => !args.only || s.name.includes(args.only))) {
  const echo = await subject.open();
  for (let i = 0; i < 200; i++) await echo.call(); // warm up
  counts.clear();
  const before = switches();
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (let i = 0; i < CALLS; i++) await echo.call();
  const used = process.cpuUsage(cpu);
  const wallUs = ((performance.now() - started) * 1000) / CALLS;
  const after = switches();
  const perCall = [...counts].sort((a, b) => b[1] - a[1]).map(([name, n]) => `  ${(n / CALLS).toFixed(2).padStart(6)}  ${name}`);
  const crossings = [...counts].filter(([name]) => !name.startsWith('callback') && !name.startsWith('read event')).reduce((sum, [, n]) => sum + n, 0);
  const callbacks = [...counts].filter(([name]) => name.startsWith('callback')).reduce((sum, [, n]) => sum + n, 0);
  console.log(`${subject.name}: ${(crossings / CALLS).toFixed(2)} crossings, ${(callbacks / CALLS).toFixed(2)} callbacks per call; CPU ${((used.user + used.system) / CALLS).toFixed(1)} µs, wall ${wallUs.toFixed(1)} µs per call`);
  console.log(perCall.join('\n'));
  const woken = [...after].map(([name, n]) => [name, (n - (before.get(name) ?? 0)) / CALLS] as const).filter(([, n]) => n >= 0.01);
  console.log(`  sleeps (voluntary context switches) per call: ${woken.filter(([name]) => !name.startsWith('cpu')).map(([name, n]) => `${name} ${n.toFixed(2)}`).join(', ')}`);
  console.log(`  CPU µs per call by thread: ${woken.filter(([name]) => name.startsWith('cpu')).map(([name, n]) => `${name.slice(7)} ${(n * 1000).toFixed(0)}`).join(', ')}`);
  await echo.close();
}
process.exit(0);
