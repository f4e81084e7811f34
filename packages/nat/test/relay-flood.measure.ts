/**
 * What one hostile rendezvous costs an agent by opening relay tunnels it did not ask for (docs/security.md, "What a
 * rendezvous can make an agent do"). Not a test (CPU and memory are measurements, not pass/fail): run with
 *
 *   node --conditions=source --import tsx packages/nat/test/relay-flood.measure.ts [tunnels] [seconds]
 *
 * The agent runs in its own process, registered with a "rendezvous" in this one. Two attacks:
 * - stall: `tunnels` nat.relay tunnels opened at once, none saying hello (each a TLS server handshake the agent
 *   waits on): how many it accepts, and its heap + RSS after GC while they are held.
 * - churn: for `seconds`, 256 workers each open a tunnel, complete a TLS handshake as a fresh caller would (keys
 *   from a pool of 32) and reset it: handshakes done, and the agent's CPU time over the period.
 * - calls, for reference: for `seconds`, 256 workers each call a method the agent does not serve, over and over
 *   (what any peer's refused calls cost; a refused relay request costs about as much).
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { AgentError, createAgent, Identity, type AgentId } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';
import { reach, secureTunnel } from '../src/index.js';

interface Usage {
  cpuMs: number;
  heap: number;
  rss: number;
}
const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);

if (process.argv[2] === '--agent') {
  const gc = (globalThis as { gc?: () => void }).gc!;
  const q = quic({ port: 0, host: '127.0.0.1' });
  const agent = await createAgent({ channels: [q, webSocket()], plugins: [reach({ rendezvous: process.argv[3]!, quic: q, heartbeatMs: 600_000 })] });
  console.log(agent.id);
  for await (const _line of createInterface({ input: process.stdin })) {
    for (let i = 0; i < 4; i++) gc();
    const cpu = process.cpuUsage();
    const m = process.memoryUsage();
    console.log(JSON.stringify({ cpuMs: (cpu.user + cpu.system) / 1000, heap: m.heapUsed, rss: m.rss }));
  }
  await agent.close();
  process.exit(0);
}

const tunnels = Number(process.argv[2] ?? 1024);
const seconds = Number(process.argv[3] ?? 10);
const rendezvous = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
rendezvous.handle('rdv.info', () => ({ stun: [] }));
rendezvous.handle('rdv.register', () => ({ ok: true }));
const child = spawn(process.execPath, ['--expose-gc', '--conditions=source', '--import', 'tsx', fileURLToPath(import.meta.url), '--agent', rendezvous.addresses[0]!], {
  stdio: ['pipe', 'pipe', 'inherit'],
});
const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
const next = async (): Promise<string> => (await lines.next()).value as string;
const victim = (await next()) as AgentId;
const usage = async (): Promise<Usage> => {
  child.stdin!.write('\n');
  return JSON.parse(await next()) as Usage;
};
const open = (from: AgentId) => rendezvous.openTunnel(victim, 'nat.relay', { from }, { timeoutMs: 10_000 });

const idle = await usage();
const opened = await Promise.allSettled(Array.from({ length: tunnels }, () => open(Identity.generate().id)));
const held = await usage();
const accepted = opened.filter((o) => o.status === 'fulfilled').length;
console.log(`stall: ${tunnels} tunnels opened at once, ${accepted} accepted, ${tunnels - accepted} refused`);
console.log(`  agent heap ${mib(idle.heap)} -> ${mib(held.heap)} MiB, RSS ${mib(idle.rss)} -> ${mib(held.rss)} MiB, CPU ${(held.cpuMs - idle.cpuMs).toFixed(0)} ms`);
for (const o of opened) if (o.status === 'fulfilled') o.value.stream.reset(new AgentError('CANCELLED', 'done'));
await new Promise((resolve) => setTimeout(resolve, 1000));

const callers = Array.from({ length: 32 }, () => Identity.generate());
const credentials = callers.map((c) => selfSignedCertificate(c));
const start = await usage();
const end = performance.now() + seconds * 1000;
let handshakes = 0;
let failures = 0;
await Promise.all(
  Array.from({ length: 256 }, async (_, n) => {
    while (performance.now() < end) {
      const k = (n + handshakes) % callers.length;
      try {
        const { stream } = await open(callers[k]!.id);
        const secured = await secureTunnel(stream, { tls: credentials[k]!, role: 'client', expectedPeer: victim });
        handshakes++;
        secured.stream.reset(new AgentError('CANCELLED', 'done'));
      } catch {
        failures++;
      }
    }
  }),
);
const after = await usage();
const cpu = after.cpuMs - start.cpuMs;
console.log(`churn: ${seconds} s, ${handshakes} handshakes done, ${failures} refused or failed`);
console.log(`  agent CPU ${cpu.toFixed(0)} ms (${(cpu / seconds / 10).toFixed(0)}% of a core), ${handshakes ? (cpu / handshakes).toFixed(2) : '-'} ms per handshake; RSS ${mib(after.rss)} MiB`);
const before = await usage();
const stop = performance.now() + seconds * 1000;
let calls = 0;
await Promise.all(
  Array.from({ length: 256 }, async () => {
    while (performance.now() < stop) {
      await rendezvous.send(victim, 'no-such-method').catch(() => undefined);
      calls++;
    }
  }),
);
const last = await usage();
const callCpu = last.cpuMs - before.cpuMs;
console.log(`calls: ${seconds} s, ${calls} refused calls; agent CPU ${callCpu.toFixed(0)} ms (${(callCpu / seconds / 10).toFixed(0)}% of a core), ${((callCpu / calls) * 1000).toFixed(0)} µs per call`);
child.stdin!.end();
await rendezvous.close();
