/**
 * What composition and duplex calls cost next to a plain call, over wss on loopback, in one run:
 *   pnpm --filter @agentlink/benchmarks compose
 * Subjects, each timed as `CALLS` sequential operations per round, rounds interleaved (a slow spell of a shared
 * machine lands on every subject), ratios taken per round against `send` and reported as median [min–max]:
 * - `send`: one unary call to one peer (the baseline);
 * - `parallel all ×1`, `race ×1`: the helpers around one call (their own cost);
 * - `Promise.all of 3 sends (by hand)`, then `parallel all ×3`, `parallel first ×3`, `race ×3`: the same call to
 *   three peers at once (client and peers share this process and 2 cores, so three calls cost ~3× one: compare
 *   the helpers with the hand-written fan-out, not with `send`);
 * - `fallback (first answers)`: the helper's overhead when no fallback is needed;
 * - `duplex echo round trip`: send one item and read its echo, over one duplex call kept open.
 */
import { createAgent, fallback, parallel, race, type Agent } from '@agentlink/core';
import { webSocket } from '@agentlink/ws';
import { median } from './median.js';

const CALLS = Number(process.env.CALLS ?? 300);
const ROUNDS = Number(process.env.ROUNDS ?? 15);

const servers: Agent[] = [];
for (let i = 0; i < 3; i++) {
  const server = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
  server.handle('echo', (body: unknown) => body);
  server.handleDuplex('echo-duplex', async function* (incoming) {
    for await (const item of incoming) yield item;
  });
  servers.push(server);
}
const peers = servers.map((s) => s.addresses[0]!);
const client = await createAgent({ channels: [webSocket()] });
const duplex = client.duplex<number, number>(peers[0]!, 'echo-duplex');
const echoes = duplex[Symbol.asyncIterator]();

const subjects: Record<string, () => Promise<unknown>> = {
  send: () => client.send(peers[0]!, 'echo', 1),
  'parallel all ×1': () => parallel(client, peers.slice(0, 1), 'echo', 1),
  'race ×1': () => race(client, peers.slice(0, 1), 'echo', 1),
  'Promise.all of 3 sends (by hand)': () => Promise.all(peers.map((peer) => client.send(peer, 'echo', 1))),
  'parallel all ×3': () => parallel(client, peers, 'echo', 1),
  'parallel first ×3': () => parallel(client, peers, 'echo', 1, { mode: 'first' }),
  'race ×3': () => race(client, peers, 'echo', 1),
  'fallback (first answers)': () => fallback(client, peers, 'echo', 1),
  'duplex echo round trip': async () => {
    await duplex.send(1);
    await echoes.next();
  },
};

const perCallUs: Record<string, number[]> = Object.fromEntries(Object.keys(subjects).map((name) => [name, []]));
for (const run of Object.values(subjects)) for (let i = 0; i < 200; i++) await run(); // warm every path
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, run] of Object.entries(subjects)) {
    const started = performance.now();
    for (let i = 0; i < CALLS; i++) await run();
    perCallUs[name]!.push(((performance.now() - started) * 1000) / CALLS);
  }
}

const baseline = perCallUs.send!;
console.log(`Node ${process.version}, ${ROUNDS} interleaved rounds of ${CALLS} sequential operations, wss on loopback\n`);
console.log('| subject | µs per operation (median) | ratio to send: median [min–max] |\n|---|---|---|');
for (const [name, values] of Object.entries(perCallUs)) {
  const ratios = values.map((v, i) => v / baseline[i]!);
  console.log(`| ${name} | ${median(values).toFixed(1)} | ${median(ratios).toFixed(2)} [${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}] |`);
}
await duplex.end();
await client.close();
await Promise.all(servers.map((s) => s.close()));
