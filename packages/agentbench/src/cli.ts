/**
 * agentbench: agentlink's channels next to the raw transports, measured in the same run on this machine.
 *   agentbench [--quick] [--json] [--only <subject,...>]
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { cpus, platform, release } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadNative, quic } from '@agentlink/quic';
import { http2 } from '@agentlink/http2';
import { webSocket } from '@agentlink/ws';
import { measureSubject, type SubjectResult } from './run.js';
import { table } from './report.js';
import { agentlinkSubject } from './subjects/agentlink.js';
import { rawHttp2Subject } from './subjects/raw-http2.js';
import { rawQuicSubject } from './subjects/raw-quic.js';
import { rawWsSubject } from './subjects/raw-ws.js';
import type { ServerAddresses, Subject } from './subjects/subject.js';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
    only: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (values.help) {
  console.log(`agentbench — compare agentlink's channels with the raw transports on this machine

  agentbench            full local run (a second process serves; about a minute)
  agentbench --quick    a short run (CI uses it)
  agentbench --json     machine-readable results
  agentbench --only 'agentlink quic,raw QUIC engine'   measure some subjects only

Every figure comes from bytes that crossed a socket; ratios compare with the raw transport of the same run.`);
  process.exit(0);
}

// The server runs in a second process, as a peer would; from source in the repository, from dist when installed.
const serverScript = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './server.ts' : './server.js', import.meta.url));
const server = spawn(process.execPath, [...process.execArgv, serverScript], {
  stdio: ['pipe', 'pipe', 'inherit'],
});
const [line] = (await once(server.stdout, 'data')) as [Buffer];
const addresses = JSON.parse(line.toString()) as ServerAddresses;
const native = loadNative();

const subjects: Subject[] = [
  rawHttp2Subject(addresses.rawHttp2, false),
  rawHttp2Subject(addresses.rawHttp2, true),
  rawWsSubject(addresses.rawWss),
  ...(native.ok && addresses.rawQuic ? [rawQuicSubject(native.binding, addresses.rawQuic)] : []),
  ...(addresses.agentlinkQuic ? [agentlinkSubject('agentlink quic', 'raw QUIC engine', addresses.agentlinkQuic, () => quic())] : []),
  agentlinkSubject('agentlink http2', 'raw http2 (TLS)', addresses.agentlinkHttp2, () => http2()),
  agentlinkSubject('agentlink ws', 'raw ws (TLS)', addresses.agentlinkWs, () => webSocket()),
];
const only = values.only?.split(',').map((s) => s.trim());
const chosen = only ? subjects.filter((s) => only.includes(s.name)) : subjects;

const results: SubjectResult[] = [];
for (const subject of chosen) {
  results.push(
    await measureSubject(subject, {
      quick: values.quick,
      onProgress: (message) => values.json || process.stderr.write(`\r\x1b[K… ${message}`),
    }),
  );
}
if (!values.json) process.stderr.write('\r\x1b[K');

const machine = { node: process.version, platform: `${platform()} ${release()}`, cpus: `${cpus().length} × ${cpus()[0]?.model ?? '?'}`, quic: native.ok ? native.binding.engineVersion() : `off: ${native.reason}` };
if (values.json) {
  console.log(JSON.stringify({ machine, quick: values.quick, results }, null, 2));
} else {
  console.log(`agentbench — Node ${machine.node}, ${machine.platform}, ${machine.cpus}; ${machine.quic}`);
  console.log(table(results));
  console.log('(ratios: agentlink quic vs raw QUIC engine, agentlink http2 vs raw http2 (TLS), agentlink ws vs raw ws; RTT = one request/response on an open connection)');
}
server.stdin.end();
await once(server, 'exit');
