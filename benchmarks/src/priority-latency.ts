/**
 * Latency of `critical` calls while 2,000 `low` calls wait for the same peer, next to the same calls on an
 * idle pool — the measure of the pool's priority queue.
 *   pnpm --filter @agentlink/benchmarks priority
 * The client keeps the backlog topped up at 2,000 low calls (each takes 1 ms in the handler) on one channel
 * of 8 slots, and sends critical calls one after another.
 */
import { createAgent, type Transport } from '@agentlink/core';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';

const BACKLOG = 2000;
const CRITICAL_CALLS = 300;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function criticalLatencies(client: Awaited<ReturnType<typeof createAgent>>, address: string): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < CRITICAL_CALLS; i++) {
    const started = performance.now();
    await client.send(address, 'work', i, { priority: 'critical' });
    latencies.push(performance.now() - started);
  }
  return latencies.sort((a, b) => a - b);
}

export async function measure(name: string, listen: () => Transport, dial: () => Transport) {
  const server = await createAgent({ channels: [listen()] });
  server.handle('work', async (n: number) => {
    await sleep(1);
    return n;
  });
  const client = await createAgent({ channels: [dial()], maxCallsPerChannel: 8, maxChannelsPerPeer: 1 });
  const address = server.addresses[0]!;
  for (let i = 0; i < 50; i++) await client.send(address, 'work', i); // warm up
  const idle = await criticalLatencies(client, address);

  let running = true;
  let lowDone = 0;
  let lowPending = 0;
  const lowLatencies: number[] = [];
  const topUp = (): void => {
    while (running && lowPending < BACKLOG) {
      lowPending++;
      const started = performance.now();
      void client.send(address, 'work', 0, { priority: 'low', timeoutMs: 600_000 }).then(() => {
        lowPending--;
        lowDone++;
        lowLatencies.push(performance.now() - started);
        topUp();
      });
    }
  };
  topUp();
  await sleep(100);
  const queuedAtStart = client.stats().pendingCalls.low;
  const loaded = await criticalLatencies(client, address);
  running = false;
  while (lowPending > 0) await sleep(20);
  await client.close();
  await server.close();
  lowLatencies.sort((a, b) => a - b);
  return { name, idle, loaded, queuedAtStart, lowDone, lowP50: percentile(lowLatencies, 50), lowMax: lowLatencies.at(-1)! };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rows = [
    await measure('ws', () => webSocket({ port: 0, host: '127.0.0.1' }), () => webSocket({})),
    await measure('quic', () => quic({ port: 0, host: '127.0.0.1' }), () => quic({})),
  ];
  console.log(`Node ${process.version}; ${CRITICAL_CALLS} sequential critical calls; handler takes 1 ms; 8 slots on one channel\n`);
  console.log('| channel | critical p50 / p99 idle (ms) | critical p50 / p99 behind 2,000 low (ms) | low queued when measured | low completed meanwhile | low wait p50 / max (ms) |');
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) {
    const f = (a: number[]) => `${percentile(a, 50).toFixed(2)} / ${percentile(a, 99).toFixed(2)}`;
    console.log(`| ${r.name} | ${f(r.idle)} | ${f(r.loaded)} | ${r.queuedAtStart} | ${r.lowDone} | ${r.lowP50.toFixed(0)} / ${r.lowMax.toFixed(0)} |`);
  }
}
