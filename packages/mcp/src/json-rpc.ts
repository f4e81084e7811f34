import { AgentError } from '@agentlink/core';
import { JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/**
 * MCP messages travel as JSON text items, not as MessagePack structures: JSON-RPC is JSON (an absent field stays
 * absent instead of turning into nil, which the SDK's schemas refuse), and deep JSON schemas in tool
 * definitions are not cut by MessagePack's nesting bound. The frame size bounds one message.
 */
export function encodeMessage(message: JSONRPCMessage): string {
  return JSON.stringify(message);
}

/** Parses and validates one item from the peer, as the SDK's own transports do. */
export function decodeMessage(item: unknown): JSONRPCMessage {
  if (typeof item !== 'string') throw new AgentError('PROTOCOL_ERROR', 'an MCP message must be JSON text');
  let value: unknown;
  try {
    value = JSON.parse(item);
  } catch (error) {
    throw new AgentError('PROTOCOL_ERROR', `an MCP message is not JSON: ${(error as Error).message}`);
  }
  const parsed = JSONRPCMessageSchema.safeParse(value);
  if (!parsed.success) throw new AgentError('PROTOCOL_ERROR', 'not a JSON-RPC message');
  return parsed.data;
}
