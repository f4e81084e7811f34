/**
 * The raw QUIC engine and raw ws (1 KB echoes, caller and handler in one process, see raw-echoes.ts) with n calls in
 * flight, interleaved rounds: calls/s and CPU µs per call of each, to find where the engine stops scaling.
 *   pnpm --filter @agentlink/benchmarks raw-inflight [--in-flight 32] [--rounds 6] [--calls 4000] [--builds a,b]
 * `--builds`: the push-read engine subject once per engine of those `ab-builds snapshot`s (`current` = the workspace's),
 * to A/B two builds of the engine itself in one interleaved run.
 */
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadNative, type NativeBinding } from '@agentlink/quic';
import { median } from './median.js';
import { rawQuicEcho, rawWsEcho, type Echo } from './raw-echoes.js';

const { values } = parseArgs({ options: { 'in-flight': { type: 'string', default: '32' }, rounds: { type: 'string', default: '6' }, calls: { type: 'string', default: '4000' }, builds: { type: 'string' } } });
const inFlight = Number(values['in-flight']);
const rounds = Number(values.rounds);
const callsPerRound = Number(values.calls);
const native = loadNative();
if (!native.ok) throw new Error(native.reason);
const payload = Buffer.alloc(1024, 1);
const subjects: Array<[string, Echo]> = values.builds
  ? await Promise.all(values.builds.split(',').map(async (build): Promise<[string, Echo]> => [`raw QUIC engine, push reads (${build})`, await rawQuicEcho(await engineOf(build), payload, { pushReads: true })]))
  : [
      ['raw QUIC engine', await rawQuicEcho(native.binding, payload)],
      ['raw QUIC engine, push reads', await rawQuicEcho(native.binding, payload, { pushReads: true })],
    ];
subjects.push(['raw ws', await rawWsEcho(payload)]);

/** The engine of an `ab-builds` snapshot: the addon copied beside its quic package, loaded as it is. */
async function engineOf(build: string): Promise<NativeBinding> {
  if (build === 'current') return native.binding;
  const quic = join(fileURLToPath(new URL('../../', import.meta.url)), 'benchmarks/.builds', build, 'node_modules/@agentlink/quic');
  const addon = readdirSync(quic).find((file) => file.endsWith('.node'));
  if (!addon) throw new Error(`${build}: no engine in ${quic}`);
  return createRequire(import.meta.url)(join(quic, addon)) as NativeBinding;
}
const rates: number[][] = subjects.map(() => []);
const cpu: number[][] = subjects.map(() => []);
for (let round = 0; round < rounds + 1; round++) {
  for (let turn = 0; turn < subjects.length; turn++) {
    const index = (round + turn) % subjects.length;
    const echo = subjects[index]![1];
    const started = performance.now();
    const before = process.cpuUsage();
    let next = 0;
    await Promise.all(Array.from({ length: inFlight }, async () => {
      while (next++ < callsPerRound) await echo.call();
    }));
    const used = process.cpuUsage(before);
    if (round === 0) continue; // warm-up
    rates[index]!.push(callsPerRound / ((performance.now() - started) / 1000));
    cpu[index]!.push((used.user + used.system) / callsPerRound);
  }
}
console.log(`1 KB echo, one process, ${inFlight} in flight, ${rounds} rounds of ${callsPerRound}; load ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
for (const [index, [name]] of subjects.entries()) {
  const r = rates[index]!;
  // Per-round ratios to the first subject (rounds are interleaved, so drift lands on all alike).
  const rateRatios = r.map((rate, round) => rate / rates[0]![round]!);
  const cpuRatios = cpu[index]!.map((us, round) => us / cpu[0]![round]!);
  const spread = (values: number[]): string => `${Math.min(...values).toFixed(3)}–${Math.max(...values).toFixed(3)}`;
  console.log(
    `${name}: ${median(r).toFixed(0)} calls/s (${Math.min(...r).toFixed(0)}–${Math.max(...r).toFixed(0)}), CPU ${median(cpu[index]!).toFixed(1)} µs per call` +
      (index > 0 ? `; × ${subjects[0]![0]}: rate ${median(rateRatios).toFixed(3)} (${spread(rateRatios)}), CPU ${median(cpuRatios).toFixed(3)} (${spread(cpuRatios)})` : ''),
  );
}
for (const [, echo] of subjects) await echo.close();
process.exit(0);
