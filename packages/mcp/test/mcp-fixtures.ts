import { once, type EventEmitter } from 'node:events';
import type { Agent } from '@agentlink/core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { expect } from 'vitest';
import { z } from 'zod';
import { AgentlinkClientTransport } from '../src/index.js';

/** An MCP server with a tool, a resource, a notification and a tool that waits for its cancellation. */
export function exampleServer(events: EventEmitter): McpServer {
  const server = new McpServer({ name: 'agentlink-test', version: '1.0.0' }, { capabilities: { logging: {} } });
  server.registerTool('add', { description: 'adds two numbers', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }, extra) => ({
    content: [{ type: 'text', text: `${a + b} for ${extra.authInfo?.clientId}` }],
  }));
  server.registerTool('announce', { description: 'sends a log notification first', inputSchema: { text: z.string() } }, async ({ text }, extra) => {
    await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: text } });
    return { content: [{ type: 'text', text: 'announced' }] };
  });
  server.registerTool('wait-for-cancel', { description: 'runs until cancelled' }, async (extra) => {
    events.emit('waiting');
    await new Promise<void>((resolve) => extra.signal.addEventListener('abort', () => resolve(), { once: true }));
    events.emit('cancelled', String(extra.signal.reason));
    return { content: [] };
  });
  server.registerResource('motd', 'memo://motd', { mimeType: 'text/plain' }, async (uri) => ({
    contents: [{ uri: uri.href, text: 'hello over agentlink' }],
  }));
  return server;
}

export async function connectClient(agent: Agent, peer: string): Promise<Client> {
  const client = new Client({ name: 'agentlink-test-client', version: '1.0.0' });
  await client.connect(new AgentlinkClientTransport(agent, peer));
  return client;
}

/** The behaviours every path must carry, given a connected client. */
export async function checkSession(client: Client, callerId: string, events: EventEmitter): Promise<void> {
  const added = await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
  expect(added.content).toEqual([{ type: 'text', text: `5 for ${callerId}` }]);

  const resource = await client.readResource({ uri: 'memo://motd' });
  expect(resource.contents).toEqual([{ uri: 'memo://motd', text: 'hello over agentlink' }]);

  const notes: unknown[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void notes.push(notification.params.data));
  await client.callTool({ name: 'announce', arguments: { text: 'tool started' } });
  expect(notes).toEqual(['tool started']);

  const controller = new AbortController();
  const waiting = once(events, 'waiting');
  const cancelled = once(events, 'cancelled');
  const call = client.callTool({ name: 'wait-for-cancel', arguments: {} }, undefined, { signal: controller.signal });
  await waiting;
  controller.abort('the user closed the panel');
  await expect(call).rejects.toThrow();
  const [reason] = (await cancelled) as [string];
  expect(reason).toContain('the user closed the panel'); // MCP's notifications/cancelled carried the reason
}
