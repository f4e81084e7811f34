import { EventEmitter } from 'node:events';
import { createAgent, type Agent } from '@agentlink/core';
import { reach } from '@agentlink/nat';
import { quic } from '@agentlink/quic';
import { startRendezvous, type Rendezvous } from '@agentlink/rendezvous';
import { webSocket } from '@agentlink/ws';
import { afterEach, describe, expect, it } from 'vitest';
import { serveMcp } from '../src/index.js';
import { checkSession, connectClient, exampleServer } from './mcp-fixtures.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

/** An agent on loopback that reaches peers only through the rendezvous' relay (as behind a symmetric NAT). */
async function relayedAgent(r: Rendezvous): Promise<Agent> {
  const q = quic({ port: 0, host: '127.0.0.1' });
  const agent = await createAgent({ channels: [q, webSocket()], plugins: [reach({ rendezvous: r.address, quic: q, paths: ['relay'] })] });
  cleanups.push(() => agent.close());
  return agent;
}

describe('MCP over a relayed path', () => {
  it('reaches an MCP server by bare AgentId through the relay, with the official SDK', async () => {
    const relayed: Buffer[] = [];
    const r = await startRendezvous({ host: '127.0.0.1', port: 0, stunPorts: [0, 0], httpPort: 0, relayTap: (chunk) => relayed.push(Buffer.from(chunk)) });
    cleanups.push(() => r.close());
    const events = new EventEmitter();
    const server = await relayedAgent(r);
    serveMcp(server, () => exampleServer(events));
    const caller = await relayedAgent(r);
    const client = await connectClient(caller, server.id);
    try {
      await checkSession(client, caller.id, events);
      expect(await caller.pathTo(server.id)).toMatchObject({ path: 'relay', kind: 'relay' });
      expect(Buffer.concat(relayed).includes(Buffer.from('hello over agentlink'))).toBe(false); // TLS end to end
    } finally {
      await client.close();
    }
  });
});
