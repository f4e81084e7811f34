/**
 * The network lab's benchmark (root): for each path, agentlink's channels at 1 / 32 / 128 concurrent streams of
 * bulk download, QUIC with its default controller (`delivery`) and others by name, raw kernel TCP with cubic and BBR per socket (iperf3
 * -C) as the reference, and a 1,000-token burst on 32 streams (p95). The whole matrix is repeated; each repeat
 * runs every figure once, so slow drifts of a shared machine spread over all of them alike.
 *
 *   sudo pnpm --filter @agentlink/benchmarks netlab [--repeats 2] [--seconds 6] [--paths 40/0,40/1,40/1/cubic,10/3]
 *        [--channels quic,quic-cubic,http2,ws,ws-fixed,relay] [--streams 1,32,128] [--no-burst] [--no-tcp] [--json out.json]
 *        [--engines old=/tmp/a.node,new=/tmp/b.node+VAR=value] [--drops] [--fairness [--controllers delivery,bbr,cubic]]
 *
 * `quic-<controller>` channels (quic-cubic, quic-newreno, quic-delivery) run QUIC with that congestion controller
 * on the server (the sender of the downloads); `quic` runs the engine's default (`delivery`; BBR before 2026-11-23).
 *
 * `--engines` compares QUIC engine builds in one run: each adds channels `quic@name` (that build's default controller) and `quic-<controller>@name`,
 * whose server and client load that file (AGENTLINK_QUIC_NATIVE, plus any `+VAR=value` in their environment: client.ts
 * reads NETLAB_QUIC_STREAM_WINDOW, the downloading agent's stream window); name them in `--channels`. The channel order is reversed every other
 * repeat, so the builds take turns going first on a machine whose load drifts. `quinn-variant.mjs` builds engines on a
 * patched quinn-proto for this (patches in quinn-proto/).
 * `relay` calls an agent in b that only the relay of a rendezvous beside it reaches (relay-peer.ts): the relayed
 * path crosses the impaired link once, client to relay.
 * `--drops` runs each figure in its own client process and counts the forwarder's drop-tail queue drops and
 * forwarded packets on the download direction (b→a) during it (samples `<channel> <streams> drops` and `… forwarded`).
 * A path is delay-ms/loss-percent[/tcp-congestion of both hosts, default bbr], on a 100 Mbit/s link.
 */
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { ServerAddresses } from '../../packages/agentbench/src/subjects/subject.js';
import type { Channel, Job, JobResult, RelayAddress } from './client.js';
import { buildForwarder, pingRtts, startLab, type Lab, type PathSpec } from './lab.js';

const { values } = parseArgs({
  options: {
    repeats: { type: 'string', default: '2' },
    seconds: { type: 'string', default: '6' },
    paths: { type: 'string', default: '40/0,40/1,40/1/cubic,10/3' },
    streams: { type: 'string', default: '1,32,128' },
    channels: { type: 'string', default: 'quic,quic-cubic,http2,ws' },
    rate: { type: 'string', default: '100' },
    json: { type: 'string' },
    engines: { type: 'string', default: '' },
    'no-burst': { type: 'boolean', default: false },
    'no-tcp': { type: 'boolean', default: false },
    drops: { type: 'boolean', default: false },
    /** Instead of the matrix: one QUIC stream (each of `--controllers` in turn) sharing the link with one iperf3 TCP flow (cubic). */
    fairness: { type: 'boolean', default: false },
    /** QUIC controllers the fairness run measures, in turn. */
    controllers: { type: 'string', default: 'delivery,bbr,cubic' },
    /** Instead of the matrix: agentbench's userspace impairment proxy (a model, no root) on the same paths, for the gap. */
    'proxy-model': { type: 'boolean', default: false },
  },
});
const repeats = Number(values.repeats);
const seconds = Number(values.seconds);
const streamCounts = values.streams.split(',').map(Number);
const channels = values.channels.split(',');
const rateMbit = Number(values.rate);
/** Engine builds by name (`--engines`), for channels `quic@name`. */
const engines = new Map(values.engines.split(',').filter(Boolean).map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)] as const));
for (const channel of channels) {
  const engine = channel.split('@')[1];
  if (engine !== undefined && !engines.has(engine)) throw new Error(`channel ${channel}: no engine ${engine} in --engines`);
}

interface Path extends PathSpec {
  name: string;
  tcp: 'cubic' | 'bbr';
}
const paths: Path[] = values.paths.split(',').map((text) => {
  const [delay, loss, tcp = 'bbr'] = text.split('/');
  return { name: text, delayMs: Number(delay), lossPercent: Number(loss), jitterMs: 0, rateMbit, tcp: tcp as 'cubic' | 'bbr' };
});

const here = (file: string): string => fileURLToPath(new URL(file, import.meta.url));
const node = (script: string): string[] => [...process.execArgv.filter((a) => !a.startsWith('--inspect')), '--conditions=source', '--import', 'tsx', script];

/** `quic-<controller>` channels run QUIC with that congestion controller (`quic`: the engine's default). */
function channelController(channel: string): string | undefined {
  return channel.startsWith('quic-') ? channel.slice('quic-'.length) : undefined;
}
/** The servers a path needs: the engine's default controller (`undefined`; also serves http2 and ws), then each one a channel names. */
const controllers = [undefined, ...new Set(channels.filter((c) => !c.includes('@')).map(channelController).filter((c): c is string => c !== undefined))];

/** Figures of one path: name → samples over repeats (Mbit/s, or ms for bursts). */
type Samples = Record<string, number[]>;
const results: Record<string, { rtt: number[]; samples: Samples }> = {};
const forwarder = await buildForwarder();
if (values.fairness) {
  await fairness();
  process.exit(0);
}
if (values['proxy-model']) {
  await proxyModel();
  process.exit(0);
}

for (let repeat = 0; repeat < repeats; repeat++) {
  for (const path of paths) {
    const entry = (results[path.name] ??= { rtt: [], samples: {} });
    const add = (key: string, value: number): void => void (entry.samples[key] ??= []).push(value);
    const lab = await startLab(path, forwarder);
    try {
      await lab.setTcpCongestion(path.tcp);
      entry.rtt.push(...(await pingRtts(lab, 10)));
      // agentbench's server in b: one process with the default QUIC controller, one per controller named by a
      // `quic-<controller>` channel (quic-cubic, quic-delivery…).
      const servers = await Promise.all(controllers.map((congestion) => startServer(lab, congestion)));
      const byController = new Map(controllers.map((congestion, i) => [congestion ?? '', servers[i]!.addresses]));
      // One more server per `quic[-<controller>]@<engine>` channel: that engine build (`--engines`), its default or the controller named.
      const engineChannels = channels.filter((c) => c.includes('@'));
      const engineServers = new Map(await Promise.all(engineChannels.map(async (c) => [c, await startServer(lab, channelController(c.split('@')[0]!), engines.get(c.split('@')[1]!))] as const)));
      servers.push(...engineServers.values());
      // Channel `relay`: a rendezvous and an agent reachable only through its relay, both in b (relay-peer.ts).
      const relay = channels.includes('relay') ? await startRelayPeer(lab) : undefined;
      for (const channel of repeat % 2 === 0 ? channels : [...channels].reverse()) {
        const controller = channelController(channel.split('@')[0]!);
        const engine = channel.split('@')[1];
        const base = (controller !== undefined || engine !== undefined ? 'quic' : channel) as Channel;
        const jobs: Job[] = streamCounts.map((streams) => ({ kind: 'bulk', channel: base, streams, seconds }));
        if (!values['no-burst']) jobs.push({ kind: 'burst', channel: base, streams: 32, tokens: 1000, rounds: 3 });
        const server = engine !== undefined ? engineServers.get(channel)!.addresses : byController.get(controller ?? '')!;
        const engineFile = engine !== undefined ? engines.get(engine) : undefined;
        // With --drops, one client per figure, between two readings of the forwarder's counters.
        for (const batch of values.drops ? jobs.map((job) => [job]) : [jobs]) {
          const before = values.drops ? await lab.counters() : undefined;
          const returned = await client(lab, server, batch, engineFile, relay?.address);
          if (before !== undefined) {
            const after = await lab.counters();
            const figure = batch[0]!.kind === 'bulk' ? String(batch[0]!.streams) : 'burst';
            add(`${channel} ${figure} drops`, after.ba.queueDrops - before.ba.queueDrops);
            add(`${channel} ${figure} forwarded`, after.ba.forwarded - before.ba.forwarded);
            console.error(`${channel} ${figure}: b->a queue drops ${after.ba.queueDrops - before.ba.queueDrops}, forwarded ${after.ba.forwarded - before.ba.forwarded}`);
          }
          for (const result of returned) {
            if (result.kind === 'bulk') add(`${channel} ${result.streams}`, result.mbitPerSecond);
            else add(`${channel} burst p95`, result.p95Ms);
          }
        }
      }
      await Promise.all([...servers, ...(relay === undefined ? [] : [relay])].map((s) => s.close()));
      for (const tcp of values['no-tcp'] ? [] : ['cubic', 'bbr']) {
        for (const parallel of [1, 32]) add(`tcp ${tcp} ${parallel}`, await iperf(lab, tcp, parallel));
      }
    } finally {
      const counters = await lab.close();
      console.error(`repeat ${repeat + 1}/${repeats} path ${path.name}: forwarder a->b ${JSON.stringify(counters.ab)} b->a ${JSON.stringify(counters.ba)}`);
    }
  }
}

/** `AGENTLINK_QUIC_NATIVE=file` before a command: the process loads that engine build. */
function withEngine(engine: string | undefined, command: string[]): [string, string[]] {
  if (engine === undefined) return [command[0]!, command.slice(1)];
  const [file, ...environment] = engine.split('+'); // `file+VAR=value+…`: extra environment for that build's processes
  return ['env', [`AGENTLINK_QUIC_NATIVE=${file}`, ...environment, ...command]];
}

async function startServer(lab: Lab, congestion: string | undefined, engine?: string): Promise<{ addresses: ServerAddresses; close(): Promise<void> }> {
  const { first, close } = await startInB<ServerAddresses>(lab, withEngine(engine, [process.execPath, ...node(here('../../packages/agentbench/src/peer-process.ts')), lab.addressB, ...(congestion === undefined ? [] : [congestion])]));
  return { addresses: first, close };
}

/** A process in b that prints one JSON line when ready and exits when its stdin ends. */
async function startInB<T>(lab: Lab, [command, args]: [string, string[]]): Promise<{ first: T; close(): Promise<void> }> {
  const child = lab.spawn(lab.b, command, args);
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  return {
    first: JSON.parse(line.toString()) as T,
    close: async () => {
      child.stdin!.end();
      await once(child, 'exit');
    },
  };
}

/** relay-peer.ts in b: a rendezvous whose relay is the only way to its agent. */
async function startRelayPeer(lab: Lab): Promise<{ address: RelayAddress; close(): Promise<void> }> {
  const { first, close } = await startInB<RelayAddress>(lab, [process.execPath, [...node(here('./relay-peer.ts')), lab.addressB]]);
  return { address: first, close };
}

async function client(lab: Lab, addresses: ServerAddresses, jobs: Job[], engine?: string, relay?: RelayAddress): Promise<JobResult[]> {
  const { stdout } = await lab.exec(lab.a, ...withEngine(engine, [process.execPath, ...node(here('./client.ts')), JSON.stringify({ addresses, relay, jobs })]));
  const out = stdout.trim().split('\n').map((line) => JSON.parse(line) as JobResult | { event: string }).filter((r): r is JobResult => 'kind' in r);
  for (const r of out) console.error(JSON.stringify(engine === undefined ? r : { ...r, engine }));
  return out;
}

/** Raw kernel TCP, congestion control set on the socket (iperf3 -C), a→b for `seconds`: Mbit/s received. */
async function iperf(lab: Lab, congestion: string, parallel: number): Promise<number> {
  const server = lab.spawn(lab.b, 'iperf3', ['-s', '-1', '--forceflush', '-B', lab.addressB]);
  const exited = once(server, 'exit'); // it exits as the test ends, maybe before we look
  await once(server.stdout!, 'data'); // "Server listening"
  const { stdout } = await lab.exec(lab.a, 'iperf3', ['-c', lab.addressB, '-t', String(seconds), '-C', congestion, '-P', String(parallel), '-J']);
  await exited;
  const report = JSON.parse(stdout) as { end: { sum_received: { bits_per_second: number } } };
  const mbit = report.end.sum_received.bits_per_second / 1e6;
  console.error(`tcp ${congestion} ${parallel}: ${mbit.toFixed(1)} Mbit/s`);
  return mbit;
}

/**
 * Fairness: one QUIC stream and one kernel TCP flow (cubic, the common host default) share each path at once, for
 * `seconds`; what each gets, QUIC with each of `--controllers`, every repeat.
 */
async function fairness(): Promise<void> {
  const rows: string[] = ['| path | QUIC controller | QUIC Mbit/s (its whole run) | TCP cubic Mbit/s (inside the QUIC run) |', '|---|---|---|---|'];
  for (let repeat = 0; repeat < repeats; repeat++) {
    for (const path of paths) {
      const lab = await startLab(path, forwarder);
      try {
        await lab.setTcpCongestion('cubic'); // the TCP flow is cubic whichever side sets its socket
        for (const congestion of values.controllers.split(',')) {
          const server = await startServer(lab, congestion);
          const tcpServer = lab.spawn(lab.b, 'iperf3', ['-s', '-1', '--forceflush', '-B', lab.addressB]);
          const tcpServerExited = once(tcpServer, 'exit'); // it exits as the test ends, maybe before we look
          await once(tcpServer.stdout!, 'data');
          // The QUIC download starts first; the TCP flow starts as it says it is measuring and ends a second before
          // it, so both share the link for the whole TCP run (figures over the overlap only).
          const quicClient = lab.spawn(lab.a, process.execPath, [...node(here('./client.ts')), JSON.stringify({ addresses: server.addresses, jobs: [{ kind: 'bulk', channel: 'quic', streams: 1, seconds }] })]);
          const lines = (async function* () {
            let buffered = '';
            for await (const data of quicClient.stdout!) {
              buffered += (data as Buffer).toString();
              for (let at = buffered.indexOf('\n'); at >= 0; at = buffered.indexOf('\n')) {
                yield JSON.parse(buffered.slice(0, at)) as JobResult | { event: string };
                buffered = buffered.slice(at + 1);
              }
            }
          })();
          await lines.next(); // {"event":"measuring"}
          // TCP flows b→a like the QUIC download (-R: the iperf3 server in b sends), with cubic on its socket.
          const tcpReport = await lab.exec(lab.a, 'iperf3', ['-c', lab.addressB, '-t', String(seconds - 1), '-C', 'cubic', '-R', '-J']);
          const quicResult: JobResult[] = [];
          for await (const line of lines) if ('kind' in line) quicResult.push(line);
          await tcpServerExited;
          await server.close();
          const tcp = (JSON.parse(tcpReport.stdout) as { end: { sum_received: { bits_per_second: number } } }).end.sum_received.bits_per_second / 1e6;
          const quicMbit = quicResult[0]!.kind === 'bulk' ? quicResult[0]!.mbitPerSecond : Number.NaN;
          rows.push(`| ${path.delayMs} ms / ${path.lossPercent}% | ${congestion} | ${quicMbit.toFixed(1)} | ${tcp.toFixed(1)} |`);
          console.error(rows.at(-1));
        }
      } finally {
        await lab.close();
      }
    }
  }
  console.log(rows.join('\n'));
}

/** agentbench's impaired scenario (userspace proxy on loopback: real UDP loss, modelled TCP) on the same paths. */
async function proxyModel(): Promise<void> {
  const { measureImpaired } = await import('../../packages/agentbench/src/impaired.js');
  const { http2 } = await import('@agentlink/http2');
  const { quic } = await import('@agentlink/quic');
  const { webSocket } = await import('@agentlink/ws');
  const child = (await import('node:child_process')).spawn(process.execPath, [...node(here('../../packages/agentbench/src/peer-process.ts')), '127.0.0.1'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  const addresses = JSON.parse(line.toString()) as ServerAddresses;
  const kinds = [
    { name: 'quic', address: addresses.agentlinkQuic!, transport: () => quic() },
    { name: 'http2', address: addresses.agentlinkHttp2, transport: () => http2() },
    { name: 'ws', address: addresses.agentlinkWs, transport: () => webSocket() },
  ];
  const rows = ['| path | streams | ' + kinds.map((k) => `${k.name} Mbit/s`).join(' | ') + ' |', `|${'---|'.repeat(kinds.length + 2)}`];
  for (let repeat = 0; repeat < repeats; repeat++) {
    for (const path of paths) {
      for (const streams of streamCounts) {
        const figures: string[] = [];
        for (const kind of kinds) {
          const r = await measureImpaired(kind.name, kind.address, kind.transport, { delayMs: path.delayMs, jitterMs: 0, lossPercent: path.lossPercent }, streams, seconds);
          figures.push(((r.bytes * 8) / 1e6 / seconds).toFixed(1));
        }
        rows.push(`| ${path.delayMs} ms / ${path.lossPercent}% | ${streams} | ${figures.join(' | ')} |`);
        console.error(rows.at(-1));
      }
    }
  }
  child.stdin!.end();
  await once(child, 'exit');
  console.log(rows.join('\n'));
}

// The report: median of the repeats, and their range.
// With an even count, the mean of the two middle samples (it printed the lower one, which read as the minimum).
const median = (v: number[]): number => {
  const sorted = [...v].sort((a, b) => a - b);
  const middle = Math.floor((sorted.length - 1) / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle]! + sorted[middle + 1]!) / 2;
};
const cell = (v: number[] | undefined, digits = 1): string => {
  if (!v?.length) return '–';
  const m = median(v).toFixed(digits);
  return v.length > 1 ? `${m} (${Math.min(...v).toFixed(digits)}–${Math.max(...v).toFixed(digits)})` : m;
};
const lines: string[] = [];
lines.push(`network lab, ${rateMbit} Mbit/s each way; Mbit/s, median of ${repeats} (range); burst = p95 ms of 32 streams × 1,000 tokens`);
lines.push('');
lines.push(`| one-way delay / loss (hosts' TCP) | ping RTT ms | ${channels.map((c) => `${c} ${streamCounts.join(' / ')}`).join(' | ')} | TCP cubic 1 / 32 | TCP BBR 1 / 32 | burst p95 ms ${channels.join(' / ')} |`);
lines.push(`|${'---|'.repeat(channels.length + 5)}`);
for (const path of paths) {
  const r = results[path.name]!;
  const s = r.samples;
  const joined = (prefix: string, counts: Array<number | string>): string => counts.map((n) => cell(s[`${prefix} ${n}`])).join(' / ');
  lines.push(
    `| ${path.delayMs} ms / ${path.lossPercent}% (${path.tcp}) | ${cell(r.rtt)} | ${channels.map((c) => joined(c, streamCounts)).join(' | ')} | ${joined('tcp cubic', [1, 32])} | ${joined('tcp bbr', [1, 32])} | ${channels.map((c) => cell(s[`${c} burst p95`], 0)).join(' / ')} |`,
  );
}
if (values.drops) {
  lines.push('', `forwarder b→a (download direction) per figure: drop-tail queue drops / forwarded packets, median of ${repeats} (range)`, '');
  lines.push(`| path | ${channels.map((c) => `${c} ${[...streamCounts, ...(values['no-burst'] ? [] : ['burst'])].join(' / ')}`).join(' | ')} |`);
  lines.push(`|${'---|'.repeat(channels.length + 1)}`);
  for (const path of paths) {
    const s = results[path.name]!.samples;
    const figures = [...streamCounts, ...(values['no-burst'] ? [] : ['burst'])];
    lines.push(`| ${path.name} | ${channels.map((c) => figures.map((f) => `${cell(s[`${c} ${f} drops`], 0)} / ${cell(s[`${c} ${f} forwarded`], 0)}`).join(', ')).join(' | ')} |`);
  }
}
console.log(lines.join('\n'));
if (values.json) writeFileSync(values.json, JSON.stringify({ date: new Date().toISOString(), rateMbit, seconds, repeats, paths, results }, null, 2));
