/** A child process: an agent that registers with the rendezvous (argv[2]) and heartbeats every argv[3] ms. */
import { createAgent } from '@agentlink/core';
import { reach } from '@agentlink/nat';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';

const [rendezvous, heartbeat] = process.argv.slice(2);
const q = quic({ port: 0, host: '127.0.0.1' });
const agent = await createAgent({ channels: [q, webSocket()], plugins: [reach({ rendezvous: rendezvous!, quic: q, heartbeatMs: Number(heartbeat) })] });
process.stdout.write(`${JSON.stringify({ id: agent.id })}\n`);
