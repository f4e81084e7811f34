/**
 * What probing a silent peer costs (packages/quic/native/src/quiet.rs): N callers, each its own agent (one QUIC
 * connection each), hold a streamed call open to one peer whose handler thinks and never answers — a fleet's
 * server waiting on models. Over a window, per waiting connection: datagrams sent by both sides per second, and
 * CPU of both processes per second. Modes are probe intervals (`AGENTLINK_QUIC_QUIET_PROBE_MS`, 0 = off: the
 * keep-alives alone), each in a fresh pair of processes, interleaved round by round:
 *   node --conditions=source --import tsx benchmarks/src/quiet-probes.ts [connections=200] [rounds=3] [windowS=10] [modes=0,500,250]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createAgent, type Agent } from '@agentlink/core';
import { quic } from '@agentlink/quic';
import { median } from './median.js';

/** The engine's connection stats, as a QUIC channel returns them (`QuicChannel.stats()`). */
type Counted = { stats(): { sentDatagrams: number; quietProbes: number } };

const self = fileURLToPath(import.meta.url);
const [role = 'main', ...args] = process.argv[2] === 'peer' || process.argv[2] === 'caller' ? process.argv.slice(2) : ['main', ...process.argv.slice(2)];

interface Sample {
  datagramsPerConnectionPerS: number;
  cpuUsPerConnectionPerS: number;
  probesPerConnectionPerS: number;
}

function child(argv: string[], env: NodeJS.ProcessEnv): ChildProcess {
  return spawn(process.execPath, ['--conditions=source', '--import', 'tsx', self, ...argv], { stdio: ['pipe', 'pipe', 'inherit'], env });
}

/** The next line of a child's stdout (one reader per stream, kept open between lines). */
const readers = new WeakMap<NodeJS.ReadableStream, AsyncIterator<string>>();
async function line(stream: NodeJS.ReadableStream): Promise<string> {
  let reader = readers.get(stream);
  if (!reader) readers.set(stream, (reader = createInterface({ input: stream })[Symbol.asyncIterator]()));
  const next = await reader.next();
  if (next.done) throw new Error('stream ended');
  return next.value;
}

const cpuUs = (): number => {
  const { user, system } = process.cpuUsage();
  return user + system;
};

if (role === 'peer') {
  const agent = await createAgent({ channels: [quic({ port: 0, host: '127.0.0.1' })] });
  agent.handleStream('think', async function* () {
    await new Promise(() => undefined); // a model thinking: nothing, ever
    yield 0;
  });
  process.stdout.write(`${JSON.stringify({ address: agent.addresses[0] })}\n`);
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', () => {
    const sent = agent.channels().reduce((sum, c) => sum + (c as unknown as Counted).stats().sentDatagrams, 0);
    process.stdout.write(`${JSON.stringify({ cpu: cpuUs(), sent })}\n`);
  });
} else if (role === 'caller') {
  const [connections, windowS] = args.map(Number) as [number, number];
  const peer = child(['peer'], process.env);
  const { address } = JSON.parse(await line(peer.stdout!)) as { address: string };
  const callers: Agent[] = [];
  for (let i = 0; i < connections; i++) callers.push(await createAgent({ channels: [quic()] }));
  for (const caller of callers) void caller.stream(address, 'think', null, { timeoutMs: 3_600_000 })[Symbol.asyncIterator]().next().catch(() => undefined);
  await new Promise((resolve) => setTimeout(resolve, 3000)); // handshakes and the calls' first packets settle
  const ours = (): { sent: number; probes: number } =>
    callers.reduce(
      (sum, c) => {
        const stats = (c.channels()[0] as unknown as Counted).stats();
        return { sent: sum.sent + stats.sentDatagrams, probes: sum.probes + stats.quietProbes };
      },
      { sent: 0, probes: 0 },
    );
  const theirs = async (): Promise<{ cpu: number; sent: number }> => {
    peer.stdin!.write('\n');
    return JSON.parse(await line(peer.stdout!)) as { cpu: number; sent: number };
  };
  const [before, peerBefore, cpuBefore] = [ours(), await theirs(), cpuUs()];
  await new Promise((resolve) => setTimeout(resolve, windowS * 1000));
  const [after, peerAfter, cpuAfter] = [ours(), await theirs(), cpuUs()];
  const perConnection = (value: number): number => value / connections / windowS;
  const sample: Sample = {
    datagramsPerConnectionPerS: perConnection(after.sent - before.sent + peerAfter.sent - peerBefore.sent),
    cpuUsPerConnectionPerS: perConnection(cpuAfter - cpuBefore + peerAfter.cpu - peerBefore.cpu),
    probesPerConnectionPerS: perConnection(after.probes - before.probes),
  };
  process.stdout.write(`${JSON.stringify(sample)}\n`);
  peer.kill('SIGKILL');
  process.exit(0);
} else {
  const [connections = 200, rounds = 3, windowS = 10] = args.slice(0, 3).map(Number);
  const modes = (args[3] ?? '0,500,250').split(',');
  const samples = new Map<string, Sample[]>(modes.map((m) => [m, []]));
  for (let round = 1; round <= rounds; round++) {
    for (const mode of modes) {
      const caller = child(['caller', String(connections), String(windowS)], { ...process.env, AGENTLINK_QUIC_QUIET_PROBE_MS: mode });
      const sample = JSON.parse(await line(caller.stdout!)) as Sample;
      await once(caller, 'exit');
      samples.get(mode)!.push(sample);
      console.log(`round ${round} interval ${mode} ms: ${JSON.stringify(sample)}`);
    }
  }
  const range = (values: number[]): string => `${median(values).toFixed(2)} (${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)})`;
  console.log(`\n${connections} waiting connections, ${rounds} rounds of ${windowS} s, per connection per second (both processes):`);
  for (const [mode, list] of samples) {
    console.log(
      `interval ${mode === '0' ? 'off' : `${mode} ms`}: datagrams ${range(list.map((s) => s.datagramsPerConnectionPerS))}, CPU µs ${range(list.map((s) => s.cpuUsPerConnectionPerS))}, probes ${range(list.map((s) => s.probesPerConnectionPerS))}`,
    );
  }
}
