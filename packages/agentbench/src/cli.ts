/**
 * agentbench: agentlink's channels next to the raw transports, measured in the same run, on your machine or
 * between two machines. Every figure comes from bytes that crossed a socket.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { cpus, platform, release, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createAgent, type Transport } from '@agentlink/core';
import { http2 } from '@agentlink/http2';
import { loadNative, quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';
import { measureFleet, type FleetResult } from './fleet.js';
import { parseImpairment } from './impair/impairment.js';
import { measureImpaired, type ImpairedResult } from './impaired.js';
import { measureInterleaved, type InterleavedResult } from './interleaved.js';
import { fleetTable, impairedTable, interleavedRatesTable, interleavedTable, interleavedTokensTable, subjectsTable, svgChart, tokensTable } from './report.js';
import { measureSubject, type SubjectResult } from './run.js';
import { startServers } from './server.js';
import { agentlinkSubject } from './subjects/agentlink.js';
import { binaryRpcWsSubject } from './subjects/binary-rpc-ws.js';
import { jsonRpcWsSubject } from './subjects/json-rpc-ws.js';
import { rawHttp2Subject } from './subjects/raw-http2.js';
import { rawQuicSubject } from './subjects/raw-quic.js';
import { rawWsSubject } from './subjects/raw-ws.js';
import type { ServerAddresses, Subject } from './subjects/subject.js';

const HELP = `agentbench — compare agentlink's channels with the raw transports

usage
  agentbench                 local run: a second process serves; every channel, raw baseline, the
                             JSON-RPC-over-ws reference and the binary-RPC-over-ws floor (a few minutes)
  agentbench --quick         a short run (what CI runs)
  agentbench serve [--host 0.0.0.0]          serve for a run from another machine; prints the --server value
  agentbench run --server '<json from serve>'  measure against a remote agentbench serve
  agentbench run --peer <AgentId@quic://host:port> [--peer ...]   measure agentlink only, against any agent
                                             that serves echo and download (an agentbench serve does)

options
  --json                     machine-readable results on stdout
  --md                       markdown tables only (for docs)
  --svg <file>               where to write the chart (default agentbench.svg; --svg '' to skip)
  --only <names>             comma-separated subjects, e.g. 'agentlink quic,raw QUIC engine'
  --agents <counts>          logical agents for the fleet scenario (default 10,100,1000; quick 10,100)
  --impair <spec>            impaired path, e.g. loss=1,delay=40,jitter=5 (percent, ms one-way, ms)
  --streams <n>              concurrent streams over the impaired path (default 32)
  --impair-seconds <s>       duration per channel over the impaired path (default 5)
  --no-impair                skip the impaired scenario (it runs by default except with --quick)
  -h, --help`;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    quick: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
    md: { type: 'boolean', default: false },
    svg: { type: 'string', default: 'agentbench.svg' },
    only: { type: 'string' },
    agents: { type: 'string' },
    impair: { type: 'string' },
    'no-impair': { type: 'boolean', default: false },
    streams: { type: 'string', default: '32' },
    'impair-seconds': { type: 'string', default: '5' },
    host: { type: 'string', default: '0.0.0.0' },
    server: { type: 'string' },
    peer: { type: 'string', multiple: true },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (values.help) {
  console.log(HELP);
  process.exit(0);
}

const command = positionals[0] ?? 'local';
if (command === 'serve') {
  const servers = await startServers(values.host);
  console.log(`agentbench serving on ${values.host}. From the other machine (replace ${values.host} by this machine's address):`);
  console.log(`  npx agentbench run --server '${JSON.stringify(servers.addresses)}'`);
  process.on('SIGINT', () => void servers.close().then(() => process.exit(0)));
  await new Promise(() => undefined);
}

const native = loadNative();
let addresses: Partial<ServerAddresses>;
let localServer: ReturnType<typeof spawn> | undefined;
if (command === 'run') {
  if (values.server) addresses = JSON.parse(values.server) as ServerAddresses;
  else if (values.peer?.length) addresses = peersToAddresses(values.peer);
  else throw new Error('agentbench run needs --server or --peer (see --help)');
} else {
  // The peer runs in a second process, as a peer would; from source in the repository, from dist when installed.
  const serverScript = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './peer-process.ts' : './peer-process.js', import.meta.url));
  localServer = spawn(process.execPath, [...process.execArgv, '--expose-gc', serverScript, '127.0.0.1'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const [line] = (await once(localServer.stdout!, 'data')) as [Buffer];
  addresses = JSON.parse(line.toString()) as ServerAddresses;
}

/** What every channel is also compared with: what a user would write instead (subjects/json-rpc-ws.ts). */
const REFERENCE = 'JSON-RPC over ws (TLS)';
const channelKinds: Array<{ name: string; baseline: string; address?: string; transport: () => Transport }> = [
  { name: 'agentlink quic', baseline: 'raw QUIC engine', address: native.ok ? addresses.agentlinkQuic : undefined, transport: () => quic() },
  { name: 'agentlink http2', baseline: 'raw http2 (TLS)', address: addresses.agentlinkHttp2, transport: () => http2() },
  { name: 'agentlink ws', baseline: 'raw ws (TLS)', address: addresses.agentlinkWs, transport: () => webSocket() },
];
const subjects: Subject[] = [
  ...(addresses.rawHttp2 ? [rawHttp2Subject(addresses.rawHttp2, false), rawHttp2Subject(addresses.rawHttp2, true)] : []),
  ...(addresses.rawWss ? [rawWsSubject(addresses.rawWss)] : []),
  ...(native.ok && addresses.rawQuic ? [rawQuicSubject(native.binding, addresses.rawQuic)] : []),
  ...(addresses.jsonRpcWs ? [jsonRpcWsSubject(addresses.jsonRpcWs)] : []),
  ...(addresses.binaryRpcWs ? [binaryRpcWsSubject(addresses.binaryRpcWs)] : []),
  ...channelKinds.filter((k) => k.address).map((k) => agentlinkSubject(k.name, k.baseline, k.address!, k.transport)),
];
// Subject names contain commas ("raw http2 (TLS, default windows)"): split only on commas outside parentheses.
const only = values.only?.split(/,(?![^()]*\))/).map((s) => s.trim());
const chosen = only ? subjects.filter((s) => only.includes(s.name)) : subjects;
const kinds = channelKinds.filter((k) => k.address && (!only || only.includes(k.name)));
const fleetCounts = (values.agents ?? (values.quick ? '10,100' : '10,100,1000')).split(',').map(Number);
const impairment = values['no-impair'] || (values.quick && !values.impair) ? undefined : parseImpairment(values.impair ?? 'loss=1,delay=40,jitter=5');

const steps = chosen.length + 1 + kinds.length * fleetCounts.length + (impairment ? kinds.length : 0);
let step = 0;
const progress = (message: string): void => {
  if (values.json || values.md || !process.stderr.isTTY) return;
  const done = Math.round((step / steps) * 24);
  process.stderr.write(`\r\x1b[K[${'#'.repeat(done)}${'.'.repeat(24 - done)}] ${step}/${steps} ${message}`);
};

// The serving process reports its own CPU and RSS through ordinary calls (an agentbench server answers them).
const observer = await createAgent({ channels: [webSocket()] });
const serverRss = (): Promise<number> => observer.send<number>(addresses.agentlinkWs!, 'rss');
const serverCpuMicros = addresses.agentlinkWs ? (): Promise<number> => observer.send<number>(addresses.agentlinkWs!, 'cpu') : undefined;

const results: SubjectResult[] = [];
for (const subject of chosen) {
  results.push(await measureSubject(subject, { quick: values.quick, onProgress: progress, serverCpuMicros }));
  step++;
}

const interleaved: InterleavedResult[] = await measureInterleaved(chosen, { quick: values.quick, reference: REFERENCE, onProgress: progress });
step++;

const fleet: FleetResult[] = [];
for (const kind of kinds) {
  for (const count of fleetCounts) {
    progress(`${kind.name}: ${count} agents`);
    fleet.push(await measureFleet(kind.name, kind.address!, kind.transport, serverRss, count));
    step++;
  }
}
await observer.close();

const impaired: ImpairedResult[] = [];
if (impairment) {
  for (const kind of kinds) {
    progress(`${kind.name}: impaired path`);
    impaired.push(await measureImpaired(kind.name, kind.address!, kind.transport, impairment, Number(values.streams), Number(values['impair-seconds'])));
    step++;
  }
}
if (!values.json && !values.md && process.stderr.isTTY) process.stderr.write('\r\x1b[K');

const machine = {
  node: process.version,
  os: `${platform()} ${release()}`,
  cpus: `${cpus().length} × ${cpus()[0]?.model?.trim() ?? '?'}`,
  memoryGiB: Math.round(totalmem() / 2 ** 30),
  quic: native.ok ? native.binding.engineVersion() : `off: ${native.reason}`,
};
const impairDescription = impairment
  ? `${impairment.lossPercent}% loss, ${impairment.delayMs} ms one-way delay ± ${impairment.jitterMs} ms, ${values.streams} concurrent streams`
  : '';

if (values.json) {
  console.log(JSON.stringify({ machine, quick: values.quick, results, interleaved, fleet, impaired, impairment: impairment ?? null }, null, 2));
} else {
  const header = `agentbench — Node ${machine.node}, ${machine.os}, ${machine.cpus}, ${machine.memoryGiB} GiB; ${machine.quic}`;
  const sections = [
    values.md ? `_${header}_` : header,
    subjectsTable(results),
    '(agentlink rows: value and ratio to the raw transport of the same run — agentlink quic vs raw QUIC engine, agentlink http2 vs raw http2 (TLS), agentlink ws vs raw ws (TLS). RTT = one request/response on an open connection. Bulk CPU = CPU time of this process and the serving process, all threads, per MB downloaded: total (client + server).)',
    interleavedTable(interleaved),
    interleavedRatesTable(interleaved),
    interleavedTokensTable(interleaved),
    '(interleaved tables: median over rounds [25th–75th percentile of rounds]; × raw and × JSON-RPC are medians of per-round ratios, ours ÷ theirs: below 1 is better for times, above 1 for calls/s. Per-token "over raw" is the per-round difference.)',
    tokensTable(results),
    fleetTable(fleet),
    ...(impaired.length ? [impairedTable(impaired, impairDescription)] : []),
  ];
  console.log(sections.join('\n\n'));
}
if (values.svg) {
  writeFileSync(values.svg, svgChart(results, `agentlink vs raw transports (1 = raw; higher is better) — ${machine.cpus}, Node ${machine.node}`));
  if (!values.json) console.error(`chart: ${values.svg}`);
}

localServer?.stdin?.end();
if (localServer) await once(localServer, 'exit');

function peersToAddresses(peers: string[]): Partial<ServerAddresses> {
  const byScheme = (scheme: string): string | undefined => peers.find((p) => p.includes(`@${scheme}://`));
  return { agentlinkQuic: byScheme('quic'), agentlinkHttp2: byScheme('h2'), agentlinkWs: byScheme('wss') };
}
