// One process of a fleet: `count` agents, each with its own QUIC socket, a WebSocket channel for the rendezvous
// and reach(), all registered with one rendezvous. Plain JavaScript: it runs from an app that installed the packed
// tarballs with npm (benchmarks/fleet/setup.sh), as a user's would. Driven by fleet.mjs over IPC:
//   parent → child: { t: 'call', pairs: [[from index, to AgentId]], method, body?, timeoutMs } (one call per pair)
//                   { t: 'stream', pairs, bytes } (each pair streams `bytes` from the peer; through the relay when
//                   the process' agents are relay-only), { t: 'close' }
//   child → parent: { t: 'up', ids, ms }, { t: 'registered', i, at } (every registration, heartbeats included),
//                   { t: 'error', i, code, message } (background failures reach() reports), { t: 'done', results }
import { createAgent } from '@agentlink/core';
import { reach } from '@agentlink/nat';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';

const options = JSON.parse(process.argv[2]);
const { rendezvous, count, heartbeatMs, ips, relayOnly, startConcurrency = 8 } = options;
const send = (message) => process.send?.(message);

const CHUNK = new Uint8Array(16 * 1024).fill(7);
const agents = new Array(count);
const started = performance.now();
let next = 0;
async function startOne(i) {
  const ip = ips[i % ips.length]; // agents spread over the process' addresses (one: a fleet behind one NAT)
  for (let attempt = 0; ; attempt++) {
    const q = quic({ port: 0, host: ip });
    const nat = reach({ rendezvous, quic: q, heartbeatMs, ...(relayOnly ? { paths: ['relay'] } : {}) });
    nat.on('registered', () => send({ t: 'registered', i, at: Date.now() }));
    nat.on('error', (error) => send({ t: 'error', i, code: error.code, message: error.message.slice(0, 300) }));
    try {
      const agent = await createAgent({ channels: [q, webSocket({ localAddress: ip })], plugins: [nat] });
      agent.handle('ping', () => 'pong');
      agent.handleStream('blob', async function* ({ bytes }, ctx) {
        for (let sent = 0; sent < bytes && !ctx.signal.aborted; sent += CHUNK.length) yield CHUNK;
      });
      agents[i] = agent;
      return;
    } catch (error) {
      // The first registration failed (a rendezvous bound, or it is away): a fleet's supervisor would start it again.
      send({ t: 'error', i, code: error.code ?? 'START', message: `start: ${String(error.message).slice(0, 300)}` });
      if (attempt >= 20) throw error;
      await new Promise((resolve) => setTimeout(resolve, 1000 + Math.random() * 2000));
    }
  }
}
await Promise.all(
  Array.from({ length: startConcurrency }, async () => {
    while (next < count) await startOne(next++);
  }),
);
send({ t: 'up', ids: agents.map((a) => a.id), ms: performance.now() - started });

process.on('message', async (message) => {
  if (message.t === 'close') {
    await Promise.allSettled(agents.map((a) => a.close()));
    process.exit(0);
  }
  if (message.t === 'call') {
    const results = await Promise.all(
      message.pairs.map(async ([from, to]) => {
        const t0 = performance.now();
        try {
          await agents[from].send(to, message.method ?? 'ping', message.body, { timeoutMs: message.timeoutMs ?? 10_000 });
          return { ok: true, ms: performance.now() - t0, path: (await agents[from].pathTo(to))?.path };
        } catch (error) {
          return { ok: false, ms: performance.now() - t0, code: error.code ?? 'THROWN', message: String(error.message).slice(0, 200) };
        }
      }),
    );
    send({ t: 'done', id: message.id, results });
  }
  if (message.t === 'stream') {
    const results = await Promise.all(
      message.pairs.map(async ([from, to]) => {
        const t0 = performance.now();
        let received = 0;
        try {
          for await (const chunk of agents[from].stream(to, 'blob', { bytes: message.bytes }, { timeoutMs: message.timeoutMs ?? 120_000 })) received += chunk.byteLength;
          return { ok: true, ms: performance.now() - t0, bytes: received, path: (await agents[from].pathTo(to))?.path };
        } catch (error) {
          return { ok: false, ms: performance.now() - t0, bytes: received, code: error.code ?? 'THROWN', message: String(error.message).slice(0, 200) };
        }
      }),
    );
    send({ t: 'done', id: message.id, results });
  }
});
