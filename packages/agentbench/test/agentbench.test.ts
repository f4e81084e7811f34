import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { InterleavedResult } from '../src/interleaved.js';

describe('agentbench --quick', () => {
  it('measures every subject and scenario from bytes that crossed a socket, and draws the chart', async () => {
    const svg = join(await mkdtemp(join(tmpdir(), 'agentbench-')), 'chart.svg');
    const cli = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', cli, '--quick', '--json', '--agents', '10', '--svg', svg, '--impair', 'loss=1,delay=5,jitter=1', '--impair-seconds', '1', '--streams', '4'],
      { timeout: 170_000, maxBuffer: 16 * 1024 * 1024 },
    );
    const report = JSON.parse(stdout) as {
      machine: { node: string; cpus: string };
      results: Array<Record<string, any>>;
      fleet: Array<{ subject: string; bytes: number; agents: number }>;
      impaired: Array<{ subject: string; bytes: number; mbPerSecond: number }>;
      interleaved: InterleavedResult[];
    };
    expect(report.machine.node).toBe(process.version);
    const subjects = report.results.map((r) => r.subject);
    for (const expected of ['raw http2 (TLS)', 'raw ws (TLS)', 'raw QUIC engine', 'JSON-RPC over ws (TLS)', 'binary RPC over ws (TLS)', 'agentlink quic', 'agentlink http2', 'agentlink ws']) {
      expect(subjects).toContain(expected);
    }
    for (const r of report.results) {
      const figures = [
        r.connect,
        ...Object.values(r.rtt),
        r.sequential,
        r.concurrent,
        r.bulk,
        r.concurrentEcho,
        r.tokens.burst,
        r.tokens.paced,
      ] as Array<{ bytes: number }>;
      for (const figure of figures) expect(figure.bytes, `${r.subject}: ${JSON.stringify(figure)}`).toBeGreaterThan(0);
      expect(Object.keys(r.rtt)).toEqual(['1KB', '10KB', '100KB', '1MB']);
      expect(r.bulk.mbPerSecond).toBeGreaterThan(0);
      // Both processes worked for every MB: the client read it, the local server wrote it.
      expect(r.bulk.cpuMsPerMB?.client, r.subject).toBeGreaterThan(0);
      expect(r.bulk.cpuMsPerMB?.server, r.subject).toBeGreaterThan(0);
      expect(r.tokens.burst.tokensPerSecond).toBeGreaterThan(0);
    }
    // Every subject also measured in interleaved rounds (3 counted in a quick run), each round a real p50.
    expect(report.interleaved.map((r) => r.subject)).toEqual(subjects);
    for (const r of report.interleaved) {
      expect(r.roundP50s, r.subject).toHaveLength(3);
      expect(r.p50, r.subject).toBeGreaterThan(0);
      expect(r.p99, r.subject).toBeGreaterThanOrEqual(r.p50);
      expect(r.bytes, r.subject).toBeGreaterThan(0);
      // An agentlink subject's ratio is the median of its rounds' ratios to its raw baseline's rounds.
      if (r.baseline) {
        const base = report.interleaved.find((b) => b.subject === r.baseline)!;
        const ratios = r.roundP50s.map((p50, round) => p50 / base.roundP50s[round]!).sort((a, b) => a - b);
        expect(r.ratio, r.subject).toBeCloseTo(ratios[1]!, 10);
        expect(r.vsBaseline?.rtt?.median, r.subject).toBeCloseTo(ratios[1]!, 10);
      }
      // Calls/s one at a time and with 32 in flight, and a token burst's first token, in every round.
      for (const figure of [r.sequential, r.concurrent, r.ttftMs, r.perTokenUs]) {
        expect(figure.median, r.subject).toBeGreaterThan(0);
        expect(figure.p25, r.subject).toBeLessThanOrEqual(figure.median);
        expect(figure.p75, r.subject).toBeGreaterThanOrEqual(figure.median);
      }
      // Every other subject is compared with the JSON-RPC-over-ws reference of the same rounds.
      if (r.subject === 'JSON-RPC over ws (TLS)') expect(r.vsReference).toBeUndefined();
      else expect(Object.keys(r.vsReference ?? {}).sort(), r.subject).toEqual(['concurrent', 'perTokenOverUs', 'rtt', 'sequential', 'ttft']);
    }
    for (const kind of ['agentlink quic', 'agentlink http2', 'agentlink ws']) {
      expect(report.fleet.find((f) => f.subject === kind && f.agents === 10)?.bytes).toBeGreaterThan(0);
      expect(report.impaired.find((i) => i.subject === kind)?.bytes).toBeGreaterThan(0);
    }
    const chart = await readFile(svg, 'utf8');
    expect(chart).toMatch(/^<svg/);
    expect(chart).toContain('agentlink quic vs raw QUIC engine');
    expect(chart).toContain('binary RPC over ws (TLS) vs raw ws (TLS)');
  }, 180_000);
});
