/** Prints the micro suite: pnpm bench */
import { buildSuite, figures } from './suite.js';

const bench = buildSuite();
await bench.run();
console.log(`Node ${process.version}`);
console.table(figures(bench).map((f) => ({ task: f.task, 'ops/s': f.opsPerSecond, 'mean µs': f.meanUs.toFixed(2), 'p99 µs': f.p99Us.toFixed(2) })));
