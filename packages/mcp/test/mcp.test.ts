import { EventEmitter } from 'node:events';
import { createAgent, type Agent, type Transport as ChannelTransport } from '@agentlink/core';
import { http2 } from '@agentlink/http2';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentlinkClientTransport, serveMcp } from '../src/index.js';
import { checkSession, connectClient, exampleServer } from './mcp-fixtures.js';

const channels: Array<[string, () => ChannelTransport, () => ChannelTransport]> = [
  ['ws', () => webSocket({ port: 0, host: '127.0.0.1' }), () => webSocket()],
  ['http2', () => http2({ port: 0, host: '127.0.0.1' }), () => http2()],
  ['quic', () => quic({ port: 0, host: '127.0.0.1' }), () => quic()],
];

describe.each(channels)('MCP over agentlink duplex calls: %s', (_name, listen, dial) => {
  let server: Agent;
  let caller: Agent;
  const events = new EventEmitter();
  const sessions: string[] = [];

  beforeAll(async () => {
    server = await createAgent({ channels: [listen()] });
    serveMcp(server, (ctx) => {
      sessions.push(ctx.peer);
      return exampleServer(events);
    });
    caller = await createAgent({ channels: [dial()] });
  });

  afterAll(async () => {
    await caller?.close();
    await server?.close();
  });

  it('the official Client and McpServer: a tool, a resource, a notification and a cancellation; authInfo is the AgentId', async () => {
    const client = await connectClient(caller, server.addresses[0]!);
    try {
      await checkSession(client, caller.id, events);
      expect(sessions.at(-1)).toBe(caller.id);
    } finally {
      await client.close();
    }
  });

  it("closing the client ends the server's session (its McpServer closes)", async () => {
    const closed = new Promise<void>((resolve) => {
      events.once('server-closed', resolve);
    });
    serveMcp(server, () => {
      const s = exampleServer(events);
      s.server.onclose = () => events.emit('server-closed');
      return s;
    }, { method: 'mcp-observed' });
    const observed = new Client({ name: 'observed', version: '1.0.0' });
    await observed.connect(new AgentlinkClientTransport(caller, server.addresses[0]!, { method: 'mcp-observed' }));
    expect((await observed.listTools()).tools.map((t) => t.name)).toContain('add');
    await observed.close();
    await closed;
  });
});
