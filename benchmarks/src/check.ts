/**
 * Fails when a micro-benchmark figure regresses by more than --ratio (default 1.5×) against the committed
 * baseline (baseline.json) — compared only on the same machine family (CPU model), since absolute figures from
 * another machine say nothing. `--update` records a new baseline.
 *   pnpm --filter @agentlink/benchmarks check [--update] [--ratio 1.5]
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { buildSuite, figures } from './suite.js';

const { values } = parseArgs({ options: { update: { type: 'boolean', default: false }, ratio: { type: 'string', default: '1.5' } } });
const baselinePath = new URL('../baseline.json', import.meta.url);
const machine = cpus()[0]?.model?.trim() ?? 'unknown';

const bench = buildSuite();
await bench.run();
const current = figures(bench);

if (values.update) {
  writeFileSync(baselinePath, `${JSON.stringify({ machine, node: process.version, tasks: Object.fromEntries(current.map((f) => [f.task, Number(f.meanUs.toFixed(3))])) }, null, 2)}\n`);
  console.log(`baseline written for ${machine}`);
  process.exit(0);
}

const baseline = JSON.parse(readFileSync(baselinePath, 'utf8')) as { machine: string; tasks: Record<string, number> };
if (baseline.machine !== machine) {
  console.log(`baseline is from "${baseline.machine}", this is "${machine}": a different machine family, not compared`);
  process.exit(0);
}
const ratio = Number(values.ratio);
let regressions = 0;
for (const figure of current) {
  const before = baseline.tasks[figure.task];
  if (before === undefined) continue;
  const change = figure.meanUs / before;
  const flag = change > ratio ? 'REGRESSION' : 'ok';
  if (change > ratio) regressions++;
  console.log(`${flag.padEnd(10)} ${figure.task}: ${figure.meanUs.toFixed(3)} µs vs ${before} µs (${change.toFixed(2)}×)`);
}
console.log(`${regressions} of ${current.length} figures regressed beyond ${ratio}×`);
process.exit(regressions > 0 ? 1 : 0);
