/**
 * `pnpm fuzz`: a million (FUZZ_INPUTS) hostile inputs through the decoder path, with a fixed seed (FUZZ_SEED).
 * Prints inputs by kind, errors by code, median/p99/max time per input and the heap after GC before and after;
 * exits 1 if anything but an AgentError came out, a decoded value was unsafe, or the heap grew by over 8 MiB.
 */
import { runFuzz } from './run.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  console.error('run with node --expose-gc (pnpm fuzz does)');
  process.exit(2);
}
const count = Number(process.env.FUZZ_INPUTS ?? 1_000_000);
const seed = Number(process.env.FUZZ_SEED ?? 14);
const mib = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

gc();
const heapBefore = process.memoryUsage().heapUsed;
const started = performance.now();
const report = runFuzz({ count, seed, onProgress: (done) => process.stderr.write(`  ${done} inputs\n`) });
const seconds = (performance.now() - started) / 1000;
gc();
const heapAfter = process.memoryUsage().heapUsed;
// The report holds a Float64Array of one time per input; it is what remains, so it is not counted as growth.
const growth = heapAfter - heapBefore;

console.log(`fuzz: ${report.inputs} inputs, seed ${seed}, ${seconds.toFixed(1)} s`);
console.log(`  inputs by kind: ${JSON.stringify(report.inputsByKind)}`);
console.log(`  messages decoded: ${report.messages}, ended inside a frame: ${report.incomplete}`);
console.log(`  errors by code: ${JSON.stringify(report.errorsByCode)}`);
console.log(
  `  time per input: median ${report.medianUs.toFixed(1)} µs, p99 ${report.p99Ms.toFixed(3)} ms, p99.9 ${report.p999Ms.toFixed(3)} ms, max ${report.maxMs.toFixed(2)} ms (${report.slowestKind})`,
);
console.log(`  slowest by kind (ms): ${JSON.stringify(report.maxMsByKind)}`);
console.log(`  heap after GC: ${mib(heapBefore)} before, ${mib(heapAfter)} after (${growth >= 0 ? '+' : ''}${mib(growth)})`);
for (const failure of report.failures) console.log(`  FAILURE ${failure}`);
if (report.maxMs > 10) console.log('  note: the slowest input took over 10 ms (on a quiet machine none should)');
process.exitCode = report.failures.length > 0 || growth > 8 * 2 ** 20 ? 1 : 0;
