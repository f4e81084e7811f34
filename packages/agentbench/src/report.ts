import type { ImpairedResult } from './impaired.js';
import type { FleetResult } from './fleet.js';
import type { InterleavedResult, Spread } from './interleaved.js';
import type { SubjectResult } from './run.js';

const fixed = (n: number, digits: number): string => (Number.isFinite(n) ? n.toFixed(digits) : '–');

/** How a metric compares with raw: performance relative to the baseline (1 = as fast as raw, higher = better). */
export interface Metric {
  label: string;
  value(r: SubjectResult): number;
  /** Lower values are better (times), so the relative performance is raw / ours. */
  lowerIsBetter: boolean;
}

export const METRICS: Metric[] = [
  { label: 'connect', value: (r) => r.connect.ms, lowerIsBetter: true },
  { label: '1KB RTT p50', value: (r) => r.rtt['1KB']?.p50 ?? Number.NaN, lowerIsBetter: true },
  { label: '100KB RTT p50', value: (r) => r.rtt['100KB']?.p50 ?? Number.NaN, lowerIsBetter: true },
  { label: 'msgs/s (32 in flight)', value: (r) => r.concurrent.msgsPerSecond, lowerIsBetter: false },
  { label: 'bulk MB/s', value: (r) => r.bulk.mbPerSecond, lowerIsBetter: false },
  { label: '100×100KB', value: (r) => r.concurrentEcho.seconds, lowerIsBetter: true },
  { label: 'tokens/s', value: (r) => r.tokens.burst.tokensPerSecond, lowerIsBetter: false },
];

export function relativeToRaw(metric: Metric, ours: SubjectResult, raw: SubjectResult): number {
  const a = metric.value(ours);
  const b = metric.value(raw);
  return metric.lowerIsBetter ? b / a : a / b;
}

function baselineOf(results: SubjectResult[], r: SubjectResult): SubjectResult | undefined {
  return r.baseline ? results.find((x) => x.subject === r.baseline) : undefined;
}

/** The main table: each agentlink row shows its ratio to the raw transport of the same run (value ÷ raw). */
export function subjectsTable(results: SubjectResult[]): string {
  const header = [
    'subject',
    'connect ms',
    '1KB RTT p50 / p99 ms',
    '10KB p50',
    '100KB p50',
    '1MB p50',
    'msgs/s seq',
    'msgs/s ×32',
    'bulk MB/s',
    'bulk CPU ms/MB',
    '100×100KB s',
  ];
  const lines = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`];
  for (const r of results) {
    const base = baselineOf(results, r);
    const ratio = (value: number, baseValue: number | undefined): string => (base && baseValue ? ` (${fixed(value / baseValue, 2)}×)` : '');
    const rtt = (label: string): string => `${fixed(r.rtt[label]?.p50 ?? Number.NaN, 3)}${ratio(r.rtt[label]?.p50 ?? 0, base?.rtt[label]?.p50)}`;
    lines.push(
      `| ${[
        r.subject,
        `${fixed(r.connect.ms, 2)}${ratio(r.connect.ms, base?.connect.ms)}`,
        `${fixed(r.rtt['1KB']!.p50, 3)} / ${fixed(r.rtt['1KB']!.p99, 3)}${ratio(r.rtt['1KB']!.p50, base?.rtt['1KB']?.p50)}`,
        rtt('10KB'),
        rtt('100KB'),
        rtt('1MB'),
        `${fixed(r.sequential.msgsPerSecond, 0)}${ratio(r.sequential.msgsPerSecond, base?.sequential.msgsPerSecond)}`,
        `${fixed(r.concurrent.msgsPerSecond, 0)}${ratio(r.concurrent.msgsPerSecond, base?.concurrent.msgsPerSecond)}`,
        `${fixed(r.bulk.mbPerSecond, 0)}${ratio(r.bulk.mbPerSecond, base?.bulk.mbPerSecond)}`,
        cpuPerMB(r),
        `${fixed(r.concurrentEcho.seconds, 3)}${ratio(r.concurrentEcho.seconds, base?.concurrentEcho.seconds)}`,
      ].join(' | ')} |`,
    );
  }
  return lines.join('\n');
}

/** CPU per MB of the bulk download, client + server (both processes, all threads), when the server reported it. */
function cpuPerMB(r: SubjectResult): string {
  const cpu = r.bulk.cpuMsPerMB;
  return cpu ? `${fixed(cpu.client + cpu.server, 2)} (${fixed(cpu.client, 2)} + ${fixed(cpu.server, 2)})` : '–';
}

/** 1 KB round trips measured in alternating rounds (drift lands on every subject alike); × raw is the median of the rounds' ratios. */
export function interleavedTable(results: InterleavedResult[]): string {
  const lines = [
    "| subject (1 KB round trips, interleaved rounds) | p50 ms | p99 ms | × raw | × JSON-RPC | rounds' p50s, ms (min – max) |",
    '|---|---|---|---|---|---|',
  ];
  for (const r of results) {
    const ratio = r.ratio === undefined ? '' : `${fixed(r.ratio, 2)}×`;
    lines.push(
      `| ${r.subject} | ${fixed(r.p50, 3)} | ${fixed(r.p99, 3)} | ${ratio} | ${ratioOf(r.vsReference?.rtt)} | ${fixed(Math.min(...r.roundP50s), 3)} – ${fixed(Math.max(...r.roundP50s), 3)} |`,
    );
  }
  return lines.join('\n');
}

/** A figure over the rounds: median, and the middle half of the rounds in brackets. */
function spreadOf(s: Spread, digits: number): string {
  return `${fixed(s.median, digits)} [${fixed(s.p25, digits)}–${fixed(s.p75, digits)}]`;
}

/** The median of per-round ratios, with their middle half; empty when there is nothing to compare with. */
function ratioOf(s: Spread | undefined): string {
  return s ? `${fixed(s.median, 2)}× [${fixed(s.p25, 2)}–${fixed(s.p75, 2)}]` : '';
}

/** Calls per second in the interleaved rounds: one at a time and 32 in flight, against raw and JSON-RPC. */
export function interleavedRatesTable(results: InterleavedResult[]): string {
  const lines = [
    '| subject (1 KB calls/s, interleaved rounds) | seq | × raw | × JSON-RPC | 32 in flight | × raw | × JSON-RPC |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const r of results) {
    lines.push(
      `| ${r.subject} | ${spreadOf(r.sequential, 0)} | ${ratioOf(r.vsBaseline?.sequential)} | ${ratioOf(r.vsReference?.sequential)} | ${spreadOf(r.concurrent, 0)} | ${ratioOf(r.vsBaseline?.concurrent)} | ${ratioOf(r.vsReference?.concurrent)} |`,
    );
  }
  return lines.join('\n');
}

/** Five 1,000-token bursts per round (their medians): time to first token and per-token cost, against raw and JSON-RPC. */
export function interleavedTokensTable(results: InterleavedResult[]): string {
  const lines = [
    '| subject (1,000-token burst, interleaved rounds) | TTFT ms | × raw | × JSON-RPC | per-token µs | over raw, µs |',
    '|---|---|---|---|---|---|',
  ];
  for (const r of results) {
    const over = r.vsBaseline ? spreadOf(r.vsBaseline.perTokenOverUs, 2) : '';
    lines.push(
      `| ${r.subject} | ${spreadOf(r.ttftMs, 2)} | ${ratioOf(r.vsBaseline?.ttft)} | ${ratioOf(r.vsReference?.ttft)} | ${spreadOf(r.perTokenUs, 2)} | ${over} |`,
    );
  }
  return lines.join('\n');
}

export function tokensTable(results: SubjectResult[]): string {
  const lines = [
    '| subject | 1,000 tokens: TTFT ms | per-token µs | tokens/s | 50 tokens @ 50 ms: TTFT ms | total ms | overhead ms |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const r of results) {
    const { burst, paced } = r.tokens;
    lines.push(
      `| ${r.subject} | ${fixed(burst.ttftMs, 2)} | ${fixed(burst.perTokenUs, 1)} | ${fixed(burst.tokensPerSecond, 0)} | ${fixed(paced.ttftMs, 1)} | ${fixed(paced.totalMs, 0)} | ${fixed(paced.overheadMs, 0)} |`,
    );
  }
  return lines.join('\n');
}

export function fleetTable(results: FleetResult[]): string {
  const lines = ['| subject | agents | all connect, ms | calls/s (5 each, all at once) | server RSS per idle peer, KiB |', '|---|---|---|---|---|'];
  for (const r of results) {
    lines.push(`| ${r.subject} | ${r.agents} | ${fixed(r.connectAllMs, 0)} | ${fixed(r.callsPerSecond, 0)} | ${r.rssPerPeerKiB === null ? '–' : fixed(r.rssPerPeerKiB, 0)} |`);
  }
  return lines.join('\n');
}

export function impairedTable(results: ImpairedResult[], description: string): string {
  const lines = [`Impaired path: ${description}`, '', '| subject | streams | seconds | aggregate MB/s |', '|---|---|---|---|'];
  for (const r of results) lines.push(`| ${r.subject} | ${r.streams} | ${r.seconds} | ${fixed(r.mbPerSecond, 2)} |`);
  return lines.join('\n');
}

/** Grouped bars: each agentlink channel's performance relative to its raw transport, per metric (1 = raw). */
export function svgChart(results: SubjectResult[], title: string): string {
  const rows = results.filter((r) => baselineOf(results, r));
  const colors = ['#2563eb', '#16a34a', '#d97706', '#9333ea'];
  const width = 900;
  const groupWidth = (width - 120) / METRICS.length;
  const barWidth = Math.min(28, (groupWidth - 16) / Math.max(1, rows.length));
  const height = 360;
  const plotTop = 50;
  const plotBottom = height - 70;
  const maxRatio = Math.max(1.2, ...rows.flatMap((r) => METRICS.map((m) => relativeToRaw(m, r, baselineOf(results, r)!))).filter(Number.isFinite));
  const y = (v: number): number => plotBottom - (Math.min(v, maxRatio) / maxRatio) * (plotBottom - plotTop);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="20" y="24" font-size="15" font-weight="bold">${escape(title)}</text>`,
    `<line x1="80" x2="${width - 20}" y1="${y(1)}" y2="${y(1)}" stroke="#888" stroke-dasharray="4 3"/>`,
    `<text x="20" y="${y(1) + 4}">= raw</text>`,
  ];
  METRICS.forEach((metric, m) => {
    const x0 = 90 + m * groupWidth;
    rows.forEach((r, i) => {
      const v = relativeToRaw(metric, r, baselineOf(results, r)!);
      if (!Number.isFinite(v)) return;
      const x = x0 + i * barWidth;
      parts.push(`<rect x="${x}" y="${y(v)}" width="${barWidth - 3}" height="${plotBottom - y(v)}" fill="${colors[i % colors.length]}"><title>${escape(r.subject)} ${escape(metric.label)}: ${v.toFixed(2)}× raw</title></rect>`);
      parts.push(`<text x="${x + (barWidth - 3) / 2}" y="${y(v) - 3}" text-anchor="middle" font-size="9">${v.toFixed(2)}</text>`);
    });
    parts.push(`<text x="${x0 + (rows.length * barWidth) / 2}" y="${plotBottom + 16}" text-anchor="middle" font-size="10">${escape(metric.label)}</text>`);
  });
  rows.forEach((r, i) => {
    const x = 90 + i * 220;
    parts.push(`<rect x="${x}" y="${height - 30}" width="12" height="12" fill="${colors[i % colors.length]}"/>`);
    parts.push(`<text x="${x + 18}" y="${height - 20}">${escape(r.subject)} vs ${escape(r.baseline ?? '')}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n');
}

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
