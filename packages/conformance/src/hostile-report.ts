/**
 * Prints, per channel and per attack of the hostile-peer suite, the attacked process's RSS before / at its peak /
 * after (MiB), with what the attacker and a well-behaved peer saw. The attacks run at the sizes they were first
 * measured with (REPORT_SCALE), or the suite's with --suite-scale.
 *
 *   pnpm --filter @agentlink/conformance hostile-report [--channels ws,http2,quic] [--attacks huge-frames,...] [--suite-scale] [--json]
 */
import { parseArgs } from 'node:util';
import { ATTACKS } from './hostile/attacks.js';
import { REPORT_SCALE, SUITE_SCALE } from './hostile/bounds.js';
import { measureAttack, type Measurement } from './hostile/measure.js';
import type { ConformanceTarget } from './target.js';

const packageEntry = (name: string): string => new URL(`../../${name}/src/index.ts`, import.meta.url).href;

/** The channels' targets, as their conformance test files give them. */
const TARGETS: ConformanceTarget[] = [
  { name: 'ws', module: packageEntry('ws'), factory: 'webSocket', listenOptions: { port: 0 }, socket: 'tcp' },
  { name: 'http2', module: packageEntry('http2'), factory: 'http2', listenOptions: { port: 0 }, socket: 'tcp' },
  {
    name: 'quic',
    module: packageEntry('quic'),
    factory: 'quic',
    listenOptions: { port: 0, idleTimeoutMs: 2000 },
    dialOptions: { idleTimeoutMs: 2000 },
    socket: 'udp',
  },
];

const { values } = parseArgs({
  options: {
    channels: { type: 'string', default: TARGETS.map((t) => t.name).join(',') },
    attacks: { type: 'string', default: ATTACKS.map((a) => a.key).join(',') },
    'suite-scale': { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
  },
});
const channels = values.channels.split(',');
const attackKeys = values.attacks.split(',');
const scale = values['suite-scale'] ? SUITE_SCALE : REPORT_SCALE;

const mib = (bytes: number | undefined): string => (bytes === undefined ? '—' : (bytes / 1024 / 1024).toFixed(0));

function row(target: string, m: Measurement): string {
  const note = m.error ? `error: ${m.error}` : JSON.stringify(m.observed);
  return [
    target,
    m.attack,
    mib(m.baseline?.rss),
    mib(m.peakRss),
    mib(m.after?.rss),
    m.goodCallDuring ?? '—',
    m.goodCallAfter ?? '—',
    m.drained === undefined ? '—' : m.drained ? 'yes' : 'no',
    m.victimAlive ? 'yes' : 'NO',
    note.length > 160 ? `${note.slice(0, 157)}...` : note,
  ].join(' | ');
}

const results: Array<{ target: string; measurement: Measurement }> = [];
if (!values.json) {
  console.log(`scale: ${values['suite-scale'] ? 'suite' : 'report'} ${JSON.stringify(scale)}\n`);
  console.log('channel | attack | RSS before MiB | peak MiB | after MiB | good call during | after | drained | alive | attacker saw');
  console.log('---|---|---|---|---|---|---|---|---|---');
}
for (const target of TARGETS.filter((t) => channels.includes(t.name))) {
  for (const attack of ATTACKS.filter((a) => attackKeys.includes(a.key))) {
    const measurement = await measureAttack(target, attack, scale);
    results.push({ target: target.name, measurement });
    if (!values.json) console.log(row(target.name, measurement));
  }
}
if (values.json) console.log(JSON.stringify(results, null, 2));
