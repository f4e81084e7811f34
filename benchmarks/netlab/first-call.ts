/**
 * First call to a known peer over the lab (root): the time from `send` to the answer of one idempotent call on
 * QUIC, for a fresh caller (full handshake: 2 RTT to the answer) and for a restarted caller that holds the peer's
 * tickets (0-RTT: the request leaves with the first flight, 1 RTT). Interleaved, repeated; medians and spread in
 * RTT multiples of the path's ping RTT.
 *   sudo node --conditions=source --import tsx benchmarks/netlab/first-call.ts [--delay 40] [--repeats 10]
 */
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { buildForwarder, pingRtts, startLab } from './lab.js';

const { values } = parseArgs({ options: { delay: { type: 'string', default: '40' }, repeats: { type: 'string', default: '10' } } });
const peer = fileURLToPath(new URL('./first-call-peer.ts', import.meta.url));
const node = [...process.execArgv.filter((a) => !a.startsWith('--inspect')), '--conditions=source', '--import', 'tsx', peer];

const lab = await startLab({ delayMs: Number(values.delay), lossPercent: 0, jitterMs: 0, rateMbit: 100 }, await buildForwarder());
try {
  const rtts = await pingRtts(lab, 10);
  const server = lab.spawn(lab.b, process.execPath, [...node, 'serve', lab.addressB]);
  const [line] = (await once(server.stdout!, 'data')) as [Buffer];
  const { address } = JSON.parse(line.toString()) as { address: string };
  const { stdout } = await lab.exec(lab.a, process.execPath, [...node, 'call', address, values.repeats], 600_000);
  server.stdin!.end();
  const samples = stdout.trim().split('\n').map((l) => JSON.parse(l) as { kind: string; ms: number; earlyStreams: number; earlyData: string });
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const rtt = median(rtts);
  console.log(`path: ${values.delay} ms one-way, ping RTT median ${rtt.toFixed(1)} ms (${rtts.map((r) => r.toFixed(1)).join(' ')})`);
  for (const kind of ['fresh', 'resumed']) {
    const of = samples.filter((s) => s.kind === kind);
    const ms = of.map((s) => s.ms);
    console.log(
      `${kind.padEnd(8)} first idempotent call: median ${median(ms).toFixed(1)} ms = ${(median(ms) / rtt).toFixed(2)} RTT, ` +
        `min ${Math.min(...ms).toFixed(1)}, max ${Math.max(...ms).toFixed(1)} (n=${ms.length}); ` +
        `early streams ${of.map((s) => s.earlyStreams).join(',')}; early data ${[...new Set(of.map((s) => s.earlyData))].join('/')}`,
    );
  }
} finally {
  await lab.close();
}
