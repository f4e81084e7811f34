import { AgentError } from '@agentlink/core';
import { JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { checkJsonShape } from './json-shape.js';

/**
 * MCP messages travel as JSON text items, not as MessagePack structures: JSON-RPC is JSON (an absent field stays
 * absent instead of turning into nil, which the SDK's schemas refuse), and deep JSON schemas in tool
 * definitions are not cut by MessagePack's nesting bound. The frame size bounds one message.
 */
export function encodeMessage(message: JSONRPCMessage): string {
  return JSON.stringify(message);
}

/** Parses and validates one item from the peer, as the SDK's own transports do, once its shape is within bounds (json-shape.ts). */
export function decodeMessage(item: unknown): JSONRPCMessage {
  if (typeof item !== 'string') throw new AgentError('PROTOCOL_ERROR', 'an MCP message must be JSON text');
  checkJsonShape(item);
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

/**
 * Reads a session's items, delivering each valid message to `deliver` and each invalid one to `onInvalid` (the
 * session goes on, as the SDK's transports do with a bad line); ends when the peer ends its side, and throws
 * the call's error. Before each next item it awaits `room()` when given: while that waits nothing is read, so
 * the stream's window closes and the peer's `send` waits (backpressure).
 */
export async function readMessages(
  items: AsyncIterable<unknown>,
  deliver: (message: JSONRPCMessage) => void,
  onInvalid: (error: Error) => void,
  room?: () => Promise<void> | undefined,
): Promise<void> {
  for await (const item of items) {
    let message: JSONRPCMessage;
    try {
      message = decodeMessage(item);
    } catch (error) {
      onInvalid(error as Error);
      continue;
    }
    deliver(message);
    const waiting = room?.();
    if (waiting) await waiting;
  }
}

/** A response (result or error) to a request: the message a peer's request made this side send. */
export function isResponse(message: JSONRPCMessage): message is JSONRPCMessage & { id: string | number } {
  return 'id' in message && ('result' in message || 'error' in message);
}
