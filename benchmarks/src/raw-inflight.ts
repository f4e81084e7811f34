/**
 * The raw QUIC engine and raw ws (1 KB echoes, caller and handler in one process, see raw-echoes.ts) with n calls in
 * flight, interleaved rounds: calls/s and CPU µs per call of each, to find where the engine stops scaling.
 *   pnpm --filter @agentlink/benchmarks raw-inflight [--in-flight 32] [--rounds 6] [--calls 4000]
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { loadNative } from '@agentlink/quic';
import { median } from './median.js';
import { rawQuicEcho, rawWsEcho, type Echo } from './raw-echoes.js';

const { values } = parseArgs({ options: { 'in-flight': { type: 'string', default: '32' }, rounds: { type: 'string', default: '6' }, calls: { type: 'string', default: '4000' } } });
const inFlight = Number(values['in-flight']);
const rounds = Number(values.rounds);
const callsPerRound = Number(values.calls);
const native = loadNative();
if (!native.ok) throw new Error(native.reason);
const payload = Buffer.alloc(1024, 1);
const subjects: Array<[string, Echo]> = [
  ['raw QUIC engine', await rawQuicEcho(native.binding, payload)],
  ['raw QUIC engine, push reads', await rawQuicEcho(native.binding, payload, { pushReads: true })],
  ['raw ws', await rawWsEcho(payload)],
];
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
  console.log(`${name}: ${median(r).toFixed(0)} calls/s (${Math.min(...r).toFixed(0)}–${Math.max(...r).toFixed(0)}), CPU ${median(cpu[index]!).toFixed(1)} µs per call`);
}
for (const [, echo] of subjects) await echo.close();
process.exit(0);
