/**
 * The network lab's sanity check (root; `pnpm test:netlab`): traffic between the two namespaces crosses the
 * forwarder and meets the configured path — round trips near twice the one-way delay, packets lost, the bytes
 * of real TCP (ws) and UDP (QUIC) calls counted by the forwarder. No throughput pass/fail: speed figures come
 * from `pnpm --filter @agentlink/benchmarks netlab`.
 */
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { ServerAddresses } from '../../packages/agentbench/src/subjects/subject.js';
import type { JobResult, RelayAddress } from './client.js';
import { pingRtts, startLab, type Lab } from './lab.js';

const labs: Lab[] = [];
afterEach(async () => {
  await Promise.all(labs.splice(0).map((lab) => lab.close()));
});

const here = (file: string): string => fileURLToPath(new URL(file, import.meta.url));
const tsx = ['--conditions=source', '--import', 'tsx'];

describe('network lab (40 ms one-way, 1% loss, 100 Mbit/s)', () => {
  it('delays, loses and forwards real TCP and UDP between the namespaces', async () => {
    const lab = await startLab({ delayMs: 40, jitterMs: 0, lossPercent: 1, rateMbit: 100 });
    labs.push(lab);

    const rtts = await pingRtts(lab, 20);
    expect(rtts.length).toBeGreaterThanOrEqual(15); // a few may be lost (1% each way)
    const sorted = [...rtts].sort((a, b) => a - b);
    expect(sorted[0]).toBeGreaterThanOrEqual(80 * 0.95); // never faster than the configured path
    expect(sorted[Math.floor(sorted.length / 2)]).toBeLessThan(80 * 3); // and near it (generous: a loaded CI machine)

    // agentbench's server in b; agentlink calls from a over QUIC (UDP) and ws (TCP).
    const server = lab.spawn(lab.b, process.execPath, [...tsx, here('../../packages/agentbench/src/peer-process.ts'), lab.addressB]);
    try {
      const [line] = (await once(server.stdout!, 'data')) as [Buffer];
      const addresses = JSON.parse(line.toString()) as ServerAddresses;
      expect(addresses.agentlinkQuic).toContain(`quic://${lab.addressB}:`);
      const jobs = [
        { kind: 'bulk', channel: 'quic', streams: 4, seconds: 2 },
        { kind: 'bulk', channel: 'ws', streams: 4, seconds: 2 },
      ];
      const { stdout } = await lab.exec(lab.a, process.execPath, [...tsx, here('./client.ts'), JSON.stringify({ addresses, jobs })], 90_000);
      // Results, not the progress events the client also prints (`{ event: 'measuring' }`, for run.ts --fairness).
      const lines = stdout.trim().split('\n').map((l) => JSON.parse(l) as (JobResult & { bytes: number }) | { event: string });
      const results = lines.filter((l): l is JobResult & { bytes: number } => !('event' in l));
      expect(results.map((r) => r.channel)).toEqual(['quic', 'ws']);
      for (const r of results) expect(r.bytes).toBeGreaterThan(100_000);

      server.stdin!.end();
      await once(server, 'exit');
      const { ab, ba } = await lab.close();
      labs.splice(0);
      // Downloads flow b→a: every byte the calls received crossed the forwarder, which lost some packets.
      const moved = results.reduce((sum, r) => sum + r.bytes, 0);
      expect(ba.bytes).toBeGreaterThan(moved);
      expect(ba.lost).toBeGreaterThan(0);
      expect(ab.forwarded).toBeGreaterThan(0);
      expect(ab.lost + ba.lost).toBeLessThan((ab.forwarded + ba.forwarded) * 0.05); // ~1%, not a broken link
    } finally {
      server.kill();
    }
  }, 150_000);

  it('carries the relay channel: a caller in a reaches an agent in b only through the relay beside it', async () => {
    const lab = await startLab({ delayMs: 40, jitterMs: 0, lossPercent: 0, rateMbit: 100 });
    labs.push(lab);
    const peer = lab.spawn(lab.b, process.execPath, [...tsx, here('./relay-peer.ts'), lab.addressB]);
    try {
      const [line] = (await once(peer.stdout!, 'data')) as [Buffer];
      const relay = JSON.parse(line.toString()) as RelayAddress;
      expect(relay.rendezvous).toContain(`wss://${lab.addressB}:`);
      const jobs = [{ kind: 'bulk', channel: 'relay', streams: 1, seconds: 2 }];
      // The relay-only caller needs no agentbench addresses; the client reads them only for the other channels.
      const { stdout } = await lab.exec(lab.a, process.execPath, [...tsx, here('./client.ts'), JSON.stringify({ addresses: {}, relay, jobs })], 90_000);
      const results = stdout.trim().split('\n').map((l) => JSON.parse(l) as (JobResult & { bytes: number }) | { event: string }).filter((l): l is JobResult & { bytes: number } => !('event' in l));
      expect(results.map((r) => r.channel)).toEqual(['relay']);
      expect(results[0]!.bytes).toBeGreaterThan(100_000);
      peer.stdin!.end();
      await once(peer, 'exit');
      const { ba } = await lab.close();
      labs.splice(0);
      expect(ba.bytes).toBeGreaterThan(results[0]!.bytes); // the relayed bytes crossed the forwarder, b→a
    } finally {
      peer.kill();
    }
  }, 150_000);

  it('jitters without reordering: packets sent 5 ms apart with ±10 ms of jitter still arrive in order', async () => {
    const lab = await startLab({ delayMs: 20, jitterMs: 10, lossPercent: 0, rateMbit: 100 });
    labs.push(lab);
    const { stdout } = await lab.exec(lab.a, 'ping', ['-n', '-c', '100', '-i', '0.005', lab.addressB]);
    const sequence = [...stdout.matchAll(/icmp_seq=(\d+)/g)].map((m) => Number(m[1]));
    const rtts = [...stdout.matchAll(/time=([\d.]+) ms/g)].map((m) => Number(m[1]));
    expect(sequence).toHaveLength(100);
    expect(sequence).toEqual([...sequence].sort((a, b) => a - b)); // no reply overtook an earlier one
    expect(Math.min(...rtts)).toBeGreaterThanOrEqual(20); // 40 ms ± 2 × 10 ms
    expect(Math.max(...rtts) - Math.min(...rtts)).toBeGreaterThan(5); // the delay varies
  });
});
