// MCP over agentlink from the published @agentlink/mcp, as its README shows it: the official SDK's Client calls a
// tool of an McpServer reached by AgentId, and the handler sees the caller's AgentId.
import { createAgent } from '@agentlink/core';
import { AgentlinkClientTransport, serveMcp } from '@agentlink/mcp';
import { webSocket } from '@agentlink/ws';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';

const agent = await createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] });
serveMcp(agent, () => {
  const server = new McpServer({ name: 'notes', version: '1.0.0' });
  server.registerTool('add', { inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }, extra) => ({
    content: [{ type: 'text', text: `${a + b} for ${extra.authInfo?.clientId}` }],
  }));
  return server;
});
const me = await createAgent({ channels: [webSocket()] });
try {
  const client = new Client({ name: 'release-check', version: '1.0.0' });
  await client.connect(new AgentlinkClientTransport(me, agent.addresses[0]!));
  const result = await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
  const text = (result.content as { type: string; text: string }[])[0]?.text;
  if (text !== `5 for ${me.id}`) throw new Error(`mcp: tool answered ${JSON.stringify(result)}, expected "5 for ${me.id}"`);
  console.log(`mcp: a tool called over agentlink; the server saw the caller's AgentId`);
  await client.close();
} finally {
  await Promise.all([me.close(), agent.close()]);
}
