/**
 * The serving agent of the demo, in its own process: a fake LLM behind `llm.generate`.
 * Prints its address (`<AgentId>@wss://…`) on the first line of stdout.
 */
import { join } from 'node:path';
import { tmpdir, userInfo } from 'node:os';
import { createAgent, loadOrCreateIdentity } from '@agentlink/core';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';
import { fakeLlm, type GenerateRequest } from './fake-llm.js';

// A persistent key: the agent keeps its address across restarts. One directory per user: the key file is
// private to its owner, so another user's directory at the same path would be unreadable (EACCES).
const identity = await loadOrCreateIdentity(join(tmpdir(), `agentlink-demo-${userInfo().username}`, 'llm-agent.key'));
// QUIC first (agentlink's own engine); WebSocket too, for callers without it. Without the engine, QUIC says
// why once and the agent serves over WebSocket alone.
const agent = await createAgent({ identity, channels: [quic({ port: 0 }), webSocket({ port: 0 })] });

agent.handleStream('llm.generate', (request: GenerateRequest, ctx) => fakeLlm(request, ctx.signal));

process.stdout.write(`${agent.addresses.join(' ')}\n`);
process.stdin.resume();
process.stdin.on('end', () => void agent.close());
