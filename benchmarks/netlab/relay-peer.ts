/**
 * The relay side of a lab run (channel `relay`), started in namespace `b` by run.ts: a rendezvous (the relay)
 * and a server agent that may only be reached through it (`reach({ paths: ['relay'] })`), serving agentbench's
 * `download`. The caller in namespace `a` reaches the relay across the impaired path; the relay and this agent
 * share namespace b (one impaired leg, as when the relay is near one of the two agents). The relay's per-agent
 * pacing is lifted (its default, 8 MiB/s, is an operator's bandwidth limit, not a property of the path).
 * Prints `{"rendezvous": …, "id": …}` once the agent is registered; serves until stdin closes.
 * Argument: the host to bind.
 */
import { once } from 'node:events';
import { createAgent } from '@agentlink/core';
import { reach } from '@agentlink/nat';
import { quic } from '@agentlink/quic';
import { startRendezvous } from '@agentlink/rendezvous';
import { webSocket } from '@agentlink/ws';

const host = process.argv[2] ?? '127.0.0.1';
const rendezvous = await startRendezvous({ host, port: 0, stunPorts: [0, 0], httpPort: -1, relayBytesPerSecond: 1e12 });
const q = quic({ port: 0, host });
const plugin = reach({ rendezvous: rendezvous.address, quic: q, paths: ['relay'] });
const registered = once(plugin, 'registered');
const agent = await createAgent({ channels: [q, webSocket()], plugins: [plugin], maxFrameSize: 64 * 1024 * 1024 });
agent.handleStream('download', async function* ({ total, chunk }: { total: number; chunk: number }) {
  const buffer = Buffer.alloc(chunk, 7);
  for (let sent = 0; sent < total; sent += chunk) yield sent + chunk <= total ? buffer : buffer.subarray(0, total - sent);
});
await registered;
process.stdout.write(`${JSON.stringify({ rendezvous: rendezvous.address, id: agent.id })}\n`);
process.stdin.resume();
process.stdin.on('end', () => void Promise.all([agent.close(), rendezvous.close()]).then(() => process.exit(0)));
