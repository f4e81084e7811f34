/**
 * Server memory per idle connected peer, per channel:
 *   node --conditions=source --import tsx benchmarks/src/idle-peers.ts [--peers 1000] [--rounds 3] [--procs 4]
 *        [--channels quic,http2,ws] [--settle-ms 3000] [--semi-space-mib 1]
 * For each round and channel (the channel order rotates per round): a serving agent with only that channel starts
 * in its own process (--expose-gc); after a full collection its RSS is the baseline. `--peers` client agents (each
 * with its own key and connection) spread over `--procs` other processes, so the server's RSS holds only the
 * server's share, then dial it and ping once. When every one answered, they stay connected and silent for
 * `--settle-ms` (the transports' keep-alives still run), the server collects again, and
 * (RSS − baseline) / peers is the figure. JS heap and external (Buffers, native objects JavaScript knows of) are
 * reported alongside: what is left of RSS is native memory (the QUIC engine, OpenSSL, the allocator's slack).
 * Prints median and range of the rounds per channel.
 * The serving process runs with `--max-semi-space-size=<semi-space-mib>` (0: V8's default): under the handshakes'
 * allocation V8 grows its young generation (up to 3 × 16 MiB) and keeps it after the collections, which read as
 * 10–43 KiB "per peer" at 1,000 peers that belong to no peer — the rounds with a high RSS were those whose V8
 * committed heap had grown (docs/benchmarks.md).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { writeHeapSnapshot } from 'node:v8';
import { setTimeout as sleep } from 'node:timers/promises';
import { createAgent, type Agent, type Transport } from '@agentlink/core';
import { http2 } from '@agentlink/http2';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';
import { median } from './median.js';

type Channel = 'quic' | 'http2' | 'ws';
interface Memory {
  rss: number;
  heapUsed: number;
  /** V8's committed heap: used, plus the free room V8 keeps (young generation, fragments) — in RSS, not per peer. */
  heapTotal: number;
  external: number;
}
type Message = { address: string } | { memory: Memory } | { ready: number } | { failed: string };

const script = fileURLToPath(import.meta.url);
const LIMITS = { maxConnections: 100_000, maxConnectionsPerIp: 100_000, newConnectionsPerIpPerSecond: 100_000 };

function transport(channel: Channel, serving: boolean): Transport {
  const listen = serving ? { port: 0, host: '127.0.0.1', limits: LIMITS } : {};
  // http2 bounds its own handshake (5 s by default): a loaded machine missed it, as the agent's connect deadline.
  return channel === 'quic' ? quic(listen) : channel === 'http2' ? http2({ ...listen, connectTimeoutMs: 60_000 }) : webSocket(listen);
}

async function collect(): Promise<Memory> {
  // Several collections with a pause: weak callbacks and finalisers (native handles) run between them.
  for (let i = 0; i < 3; i++) {
    globalThis.gc?.();
    await sleep(50);
  }
  const { rss, heapUsed, heapTotal, external } = process.memoryUsage();
  return { rss, heapUsed, heapTotal, external };
}

/** The serving process: one agent, one channel; answers {memory} on request. */
async function serve(channel: Channel): Promise<void> {
  const agent = await createAgent({ channels: [transport(channel, true)] });
  agent.handle('echo', (body: unknown) => body);
  let readings = 0;
  let requests = 0;
  process.on('message', (message) => {
    if (message !== 'memory') return;
    const reading = ++requests;
    // Diagnosing aids (docs/benchmarks.md): IDLE_PEERS_PAUSE_MS waits before the reading with the peers (to act on
    // the process from outside, e.g. gdb); IDLE_PEERS_EXIT_AT=<n> exits at the n-th reading without closing
    // anything, so a heap profiler wrapping the server (IDLE_PEERS_SERVER_PREFIX) records what the peers held.
    const pauseMs = reading > 1 ? Number(process.env.IDLE_PEERS_PAUSE_MS ?? 0) : 0;
    if (pauseMs > 0) console.error(`server pid ${process.pid} pauses ${pauseMs} ms before its reading`);
    void sleep(pauseMs)
      .then(() => collect())
      .then((memory) => {
        // Where the JS heap per peer goes: compare the two snapshots, before and with the peers.
        if (process.env.IDLE_PEERS_HEAP_SNAPSHOT) writeHeapSnapshot(`${process.env.IDLE_PEERS_HEAP_SNAPSHOT}.${++readings}`);
        if (Number(process.env.IDLE_PEERS_EXIT_AT) === reading) {
          console.error(`server exits at reading ${reading}: ${JSON.stringify(memory)}`);
          (process as unknown as { reallyExit(code: number): never }).reallyExit(0);
        }
        process.send!({ memory });
      });
  });
  process.on('disconnect', () => void agent.close().then(() => process.exit(0)));
  process.send!({ address: agent.addresses[0] });
}

/** A client process: `count` agents, each with its own connection to `address`, pinged once, then idle. */
async function clients(channel: Channel, address: string, count: number): Promise<void> {
  const agents: Agent[] = [];
  process.on('disconnect', () => void Promise.allSettled(agents.map((a) => a.close())).then(() => process.exit(0)));
  try {
    for (let i = 0; i < count; i++) agents.push(await createAgent({ channels: [transport(channel, false)], connectTimeoutMs: 60_000 }));
    // 25 dials at a time, each given a minute: on a loaded two-core machine a 10 s connect deadline was missed.
    for (let i = 0; i < agents.length; i += 25) {
      await Promise.all(agents.slice(i, i + 25).map((agent) => agent.ping(address, { timeoutMs: 60_000 })));
    }
    process.send!({ ready: agents.length });
  } catch (error) {
    process.send!({ failed: String(error) });
  }
}

function child(args: string[], v8Flags: string[]): ChildProcess {
  // IDLE_PEERS_SERVER_PREFIX runs the serving process under a tool, e.g. "heaptrack -o /tmp/ht" (docs/benchmarks.md).
  const prefix = args[0] === 'serve' ? (process.env.IDLE_PEERS_SERVER_PREFIX?.split(' ').filter(Boolean) ?? []) : [];
  const command = [...prefix, process.execPath, ...process.execArgv, ...v8Flags, script, ...args];
  return spawn(command[0]!, command.slice(1), { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
}

async function next(process: ChildProcess): Promise<Message> {
  const [message] = (await once(process, 'message')) as [Message];
  if ('failed' in message) throw new Error(message.failed);
  return message;
}

async function memoryOf(server: ChildProcess): Promise<Memory> {
  server.send('memory');
  return ((await next(server)) as { memory: Memory }).memory;
}

interface Sample {
  rssKiB: number;
  heapKiB: number;
  heapTotalKiB: number;
  externalKiB: number;
}

async function measure(channel: Channel, peers: number, procs: number, settleMs: number, semiSpaceMiB: number): Promise<Sample> {
  const server = child(['serve', channel], ['--expose-gc', ...(semiSpaceMiB > 0 ? [`--max-semi-space-size=${semiSpaceMiB}`] : [])]);
  const { address } = (await next(server)) as { address: string };
  await sleep(500);
  const before = await memoryOf(server);
  const per = Math.ceil(peers / procs);
  const clientProcs = Array.from({ length: procs }, (_, i) => child(['clients', channel, address, String(Math.min(per, peers - i * per))], []));
  try {
    const ready = await Promise.all(clientProcs.map((p) => next(p)));
    const connected = ready.reduce((sum, m) => sum + (m as { ready: number }).ready, 0);
    if (connected !== peers) throw new Error(`${connected} of ${peers} peers connected`);
    await sleep(settleMs);
    const after = await memoryOf(server);
    const kib = (a: number, b: number): number => (a - b) / 1024 / peers;
    return {
      rssKiB: kib(after.rss, before.rss),
      heapKiB: kib(after.heapUsed, before.heapUsed),
      heapTotalKiB: kib(after.heapTotal, before.heapTotal),
      externalKiB: kib(after.external, before.external),
    };
  } finally {
    await Promise.all(clientProcs.map(async (p) => p.exitCode === null && (p.disconnect(), await once(p, 'exit'))));
    server.disconnect();
    await once(server, 'exit');
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      peers: { type: 'string', default: '1000' },
      rounds: { type: 'string', default: '3' },
      procs: { type: 'string', default: '4' },
      channels: { type: 'string', default: 'quic,http2,ws' },
      'settle-ms': { type: 'string', default: '3000' },
      'semi-space-mib': { type: 'string', default: '1' },
    },
  });
  const peers = Number(values.peers);
  const rounds = Number(values.rounds);
  const channels = values.channels.split(',') as Channel[];
  const samples = new Map<Channel, Sample[]>(channels.map((c) => [c, []]));
  for (let round = 0; round < rounds; round++) {
    const order = channels.map((_, i) => channels[(i + round) % channels.length]!);
    for (const channel of order) {
      const sample = await measure(channel, peers, Number(values.procs), Number(values['settle-ms']), Number(values['semi-space-mib']));
      samples.get(channel)!.push(sample);
      console.error(`round ${round + 1} ${channel}: ${sample.rssKiB.toFixed(1)} KiB RSS per peer (heap ${sample.heapKiB.toFixed(1)}, V8 committed ${sample.heapTotalKiB.toFixed(1)}, external ${sample.externalKiB.toFixed(1)})`);
    }
  }
  const fmt = (values: number[]): string => `${median(values).toFixed(1)} (${Math.min(...values).toFixed(1)}–${Math.max(...values).toFixed(1)})`;
  console.log(`server memory per idle peer, ${peers} peers, ${rounds} rounds, semi-space ${values['semi-space-mib']} MiB, KiB: median (range)`);
  console.log('| channel | RSS | JS heap | V8 committed | external |');
  console.log('|---|---|---|---|---|');
  for (const [channel, list] of samples) {
    console.log(`| ${channel} | ${fmt(list.map((s) => s.rssKiB))} | ${fmt(list.map((s) => s.heapKiB))} | ${fmt(list.map((s) => s.heapTotalKiB))} | ${fmt(list.map((s) => s.externalKiB))} |`);
  }
}

const [role, ...args] = process.argv.slice(2);
if (role === 'serve') await serve(args[0] as Channel);
else if (role === 'clients') await clients(args[0] as Channel, args[1]!, Number(args[2]));
else await main();
