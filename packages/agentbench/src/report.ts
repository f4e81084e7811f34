import type { SubjectResult } from './run.js';

const fixed = (n: number, digits: number): string => (Number.isFinite(n) ? n.toFixed(digits) : '–');

/** A markdown table: each agentlink row shows its ratio to the raw transport measured in the same run. */
export function table(results: SubjectResult[]): string {
  const byName = new Map(results.map((r) => [r.subject, r]));
  const sizes = Object.keys(results[0]?.rtt ?? {});
  const header = ['subject', 'connect ms', ...sizes.map((s) => `${s} RTT p50 / p99 ms`), 'bulk MB/s', '100×100KB s'];
  const lines = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`];
  for (const r of results) {
    const base = r.baseline ? byName.get(r.baseline) : undefined;
    const ratio = (value: number, baseValue: number | undefined): string =>
      base && baseValue ? ` (${fixed(value / baseValue, 2)}×)` : '';
    const cells = [
      r.subject,
      `${fixed(r.connectMs, 2)}${ratio(r.connectMs, base?.connectMs)}`,
      ...sizes.map((s) => {
        const v = r.rtt[s]!;
        return `${fixed(v.p50, 3)} / ${fixed(v.p99, 3)}${ratio(v.p50, base?.rtt[s]?.p50)}`;
      }),
      `${fixed(r.bulkMBps, 0)}${ratio(r.bulkMBps, base?.bulkMBps)}`,
      `${fixed(r.concurrentEchoSeconds, 3)}${ratio(r.concurrentEchoSeconds, base?.concurrentEchoSeconds)}`,
    ];
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}
