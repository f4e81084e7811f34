/**
 * What a streamed token costs: one handler yields N small tokens (16 bytes, as agentbench's burst) as fast as it
 * can, a caller reads them with `for await`, over each channel on loopback — and each channel's raw transport
 * streams the same burst in the same run (raw-bursts.ts). Caller and handler share this process and its one
 * event loop (as in call-cost), so a burst's time is all the work both sides do for it, with nothing overlapping:
 * µs per token (first token to last) is the per-token work of both sides, CPU µs per token the same as CPU time
 * (every thread). Subjects take turns in rounds (the first one changes each round); "over raw" is the median of
 * the rounds' differences to the channel's raw transport, "× first build" of the ratios to the first build.
 *
 * Builds: `--builds current` (default) measures the packages as built in the workspace; names of snapshots made
 * with `ab-builds snapshot <name>` load those copies instead (`--builds before,current`), so two builds of core
 * stream against each other in one run.
 *
 *   pnpm build && pnpm --filter @agentlink/benchmarks token-burst [--channels ws,http2,quic] [--rounds 15]
 *     [--bursts 4] [--tokens 1000] [--string] [--builds current] [--only <subject name part>]
 *
 * `--string`: the tokens are 16-character strings instead of 16-byte buffers. `--only`: one subject, for
 * `node --cpu-prof`.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { median } from './median.js';
import { rawHttp2Burst, rawQuicBurst, rawWsBurst, type Burst } from './raw-bursts.js';

const { values: args } = parseArgs({
  options: {
    channels: { type: 'string', default: 'ws,http2,quic' },
    rounds: { type: 'string', default: '15' },
    bursts: { type: 'string', default: '4' },
    tokens: { type: 'string', default: '1000' },
    builds: { type: 'string', default: 'current' },
    string: { type: 'boolean', default: false },
    only: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const BURSTS = Number(args.bursts);
const TOKENS = Number(args.tokens);
const TOKEN_BYTES = 16;
const channels = args.channels!.split(',');
const builds = args.builds!.split(',');
const root = fileURLToPath(new URL('../../', import.meta.url));

const tokenBytes = Buffer.alloc(TOKEN_BYTES, 7);
const tokenText = 'x'.repeat(TOKEN_BYTES);
/** What the raw subjects send per token: the same kind as the handler yields. */
const rawToken = args.string ? tokenText : tokenBytes;

interface Subject {
  name: string;
  channel: string;
  build?: string;
  source: Burst;
}

async function load(build: string, pkg: string): Promise<Record<string, any>> {
  if (build === 'current') return import(`@agentlink/${pkg}`);
  return import(join(root, 'benchmarks/.builds', build, 'node_modules/@agentlink', pkg, 'dist/index.js'));
}

async function agentlinkBurst(build: string, channel: string): Promise<Burst> {
  const core = await load(build, 'core');
  const module = await load(build, channel);
  const factory = channel === 'ws' ? module.webSocket : channel === 'quic' ? module.quic : module.http2;
  const server = await core.createAgent({ channels: [factory({ port: 0, host: '127.0.0.1' })] });
  const token = args.string ? tokenText : tokenBytes;
  server.handleStream('tokens', async function* (count: number) {
    for (let i = 0; i < count; i++) yield token;
  });
  const client = await core.createAgent({ channels: [factory()] });
  const address: string = server.addresses[0];
  await client.ping(address);
  return {
    async burst(count, onFirst) {
      let received = 0;
      for await (const item of client.stream(address, 'tokens', count)) {
        if (received === 0) onFirst();
        received += (item as Uint8Array | string).length;
      }
      if (received !== count * TOKEN_BYTES) throw new Error(`burst moved ${received} bytes`);
    },
    close: async () => void (await Promise.all([client.close(), server.close()])),
  };
}

const subjects: Subject[] = [];
for (const channel of channels) {
  let raw: Burst;
  if (channel === 'ws') raw = await rawWsBurst(rawToken);
  else if (channel === 'http2') raw = await rawHttp2Burst(rawToken);
  else {
    const { loadNative } = await import('@agentlink/quic');
    const native = loadNative();
    if (!native.ok) {
      console.error(`quic: the engine does not load here (${native.reason}); skipped`);
      continue;
    }
    raw = await rawQuicBurst(native.binding, rawToken);
  }
  subjects.push({ name: `raw ${channel}`, channel, source: raw });
  for (const build of builds) {
    subjects.push({ name: `agentlink ${channel}${builds.length > 1 ? ` (${build})` : ''}`, channel, build, source: await agentlinkBurst(build, channel) });
  }
}
const measured = args.only ? subjects.filter((s) => s.name.includes(args.only!)) : subjects;

interface Sample {
  perTokenUs: number;
  cpuPerTokenUs: number;
  ttftMs: number;
}
const samples = new Map<Subject, Sample[]>(measured.map((s) => [s, []]));

async function turn(subject: Subject): Promise<Sample> {
  const perToken: number[] = [];
  const cpu: number[] = [];
  const ttft: number[] = [];
  for (let i = 0; i < BURSTS; i++) {
    let first = 0;
    const used = process.cpuUsage();
    const started = performance.now();
    await subject.source.burst(TOKENS, () => (first = performance.now()));
    const ended = performance.now();
    const cpuUs = process.cpuUsage(used);
    perToken.push(((ended - started) * 1000) / TOKENS);
    cpu.push((cpuUs.user + cpuUs.system) / TOKENS);
    ttft.push(first - started);
  }
  return { perTokenUs: median(perToken), cpuPerTokenUs: median(cpu), ttftMs: median(ttft) };
}

// Round 0 warms every subject up; each round starts with the next subject.
for (let round = 0; round <= ROUNDS; round++) {
  for (let t = 0; t < measured.length; t++) {
    const subject = measured[(round + t) % measured.length]!;
    const sample = await turn(subject);
    if (round > 0) samples.get(subject)!.push(sample);
  }
}

const middle = (values: number[]): string => {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * (sorted.length - 1) + 0.5))]!;
  return `${at(0.25).toFixed(2)}–${at(0.75).toFixed(2)}`;
};
const fmt = (values: number[], digits = 2): string => `${median(values).toFixed(digits)} [${middle(values)}]`;

const [load1, load5] = (await import('node:os')).loadavg();
console.log(
  `${TOKENS} tokens of ${TOKEN_BYTES} ${args.string ? 'characters' : 'bytes'}, caller and handler in one process; ${ROUNDS} rounds × ${BURSTS} bursts per subject (median burst per turn); load average ${load1!.toFixed(1)} / ${load5!.toFixed(1)} (1 / 5 min)`,
);
console.log('medians over rounds [25th–75th percentile]\n');
console.log('| subject | µs per token | over raw, µs | CPU µs per token | TTFT ms | TTFT × raw | × first build (µs per token) |');
console.log('|---|---|---|---|---|---|---|');
for (const subject of measured) {
  const own = samples.get(subject)!;
  const raw = measured.find((s) => s.channel === subject.channel && s.build === undefined);
  const first = measured.find((s) => s.channel === subject.channel && s.build === builds[0]);
  const rawSamples = raw && raw !== subject ? samples.get(raw)! : undefined;
  const firstSamples = subject.build && first && first !== subject ? samples.get(first)! : undefined;
  const over = rawSamples ? fmt(own.map((s, r) => s.perTokenUs - rawSamples[r]!.perTokenUs)) : '';
  const ttftRatio = rawSamples ? fmt(own.map((s, r) => s.ttftMs / rawSamples[r]!.ttftMs)) : '';
  const vsFirst = firstSamples ? fmt(own.map((s, r) => s.perTokenUs / firstSamples[r]!.perTokenUs), 3) : '';
  console.log(
    `| ${subject.name} | ${fmt(own.map((s) => s.perTokenUs))} | ${over} | ${fmt(own.map((s) => s.cpuPerTokenUs))} | ${fmt(own.map((s) => s.ttftMs), 3)} | ${ttftRatio} | ${vsFirst} |`,
  );
}
await Promise.all(subjects.map((s) => s.source.close()));
process.exit(0);
