import { z } from 'zod';
import { isErrorCode, type ErrorCode } from '../errors.js';

/** The call priorities, most urgent first. */
export const PRIORITIES = ['critical', 'high', 'normal', 'low'] as const;
/** A call priority: `critical`, `high`, `normal` (the default) or `low`. */
export type Priority = (typeof PRIORITIES)[number];

/** Message type numbers: the first element of every encoded message (see docs/protocol.md). */
export const MessageType = {
  request: 1,
  response: 2,
  item: 3,
  end: 4,
  error: 5,
  cancel: 6,
  ping: 7,
  pong: 8,
} as const;

/**
 * `tunnel`: after the handler's `response`, the stream carries raw bytes both ways (relays, proxies).
 * `duplex`: after the request the caller sends `item`s and one `end`, while the handler sends `item`s and its
 * `end` or `error` (docs/protocol.md). Peers older than duplex reject mode 3 as a malformed request.
 */
export type CallMode = 'unary' | 'stream' | 'tunnel' | 'duplex';
const MODES: readonly CallMode[] = ['unary', 'stream', 'tunnel', 'duplex'];

/** One message of the wire protocol (docs/protocol.md), as the codec decodes it. */
export type WireMessage =
  | {
      type: 'request';
      method: string;
      /** Milliseconds the caller still allows, measured when sent; null = no deadline. */
      timeoutMs: number | null;
      priority: Priority;
      metadata: Record<string, string>;
      body: unknown;
      mode: CallMode;
    }
  | { type: 'response'; body: unknown }
  | { type: 'item'; body: unknown }
  | { type: 'end' }
  | { type: 'error'; code: ErrorCode; message: string }
  | { type: 'cancel'; code: ErrorCode; message: string }
  | { type: 'ping'; nonce: number }
  | { type: 'pong'; nonce: number };

export const MAX_METHOD_LENGTH = 256;
const MAX_METADATA_ENTRIES = 64;
const MAX_TEXT = 4096;

const method = z.string().min(1).max(MAX_METHOD_LENGTH);
const timeoutMs = z.number().int().nonnegative().nullable();
const priorityIndex = z.number().int().min(0).max(PRIORITIES.length - 1);
const metadata = z
  .record(z.string().max(MAX_TEXT), z.string().max(MAX_TEXT))
  .refine((m) => Object.keys(m).length <= MAX_METADATA_ENTRIES, 'too many metadata entries');
const modeIndex = z.union([z.literal(0), z.literal(1), z.literal(2), z.literal(3)]);
/** Unknown codes from a newer peer are kept readable as UNKNOWN rather than rejected. */
const code = z.string().max(64).transform((c): ErrorCode => (isErrorCode(c) ? c : 'UNKNOWN'));
const text = z.string().max(MAX_TEXT);
const nonce = z.number().int().nonnegative();

/** Schemas of the encoded tuples, by message type number. zod checks every message that came off the network. */
const SCHEMAS = {
  [MessageType.request]: z.tuple([z.literal(1), method, timeoutMs, priorityIndex, metadata, z.unknown(), modeIndex]),
  [MessageType.response]: z.tuple([z.literal(2), z.unknown()]),
  [MessageType.item]: z.tuple([z.literal(3), z.unknown()]),
  [MessageType.end]: z.tuple([z.literal(4)]),
  [MessageType.error]: z.tuple([z.literal(5), code, text]),
  [MessageType.cancel]: z.tuple([z.literal(6), code, text]),
  [MessageType.ping]: z.tuple([z.literal(7), nonce]),
  [MessageType.pong]: z.tuple([z.literal(8), nonce]),
} as const;

type Schemas = typeof SCHEMAS;
export type EncodedMessage = { [K in keyof Schemas]: z.input<Schemas[K]> }[keyof Schemas];

export function messageToTuple(message: WireMessage): EncodedMessage {
  switch (message.type) {
    case 'request':
      return [
        1,
        message.method,
        message.timeoutMs,
        PRIORITIES.indexOf(message.priority),
        message.metadata,
        message.body,
        MODES.indexOf(message.mode) as 0 | 1 | 2 | 3,
      ];
    case 'response':
      return [2, message.body];
    case 'item':
      return [3, message.body];
    case 'end':
      return [4];
    case 'error':
      return [5, message.code, message.message];
    case 'cancel':
      return [6, message.code, message.message];
    case 'ping':
      return [7, message.nonce];
    case 'pong':
      return [8, message.nonce];
  }
}

/** Validates a decoded value; returns undefined when it is not a well-formed message. */
export function tupleToMessage(value: unknown): WireMessage | undefined {
  if (!Array.isArray(value)) return undefined;
  const type: unknown = value[0];
  // Own properties only: a type like 'constructor' or '__proto__' must not find Object.prototype's members.
  if (typeof type !== 'number' || !Object.hasOwn(SCHEMAS, type)) return undefined;
  const schema = SCHEMAS[type as keyof Schemas];
  const parsed = schema.safeParse(value);
  if (!parsed.success) return undefined;
  const t = parsed.data;
  switch (t[0]) {
    case 1:
      return {
        type: 'request',
        method: t[1],
        timeoutMs: t[2],
        priority: PRIORITIES[t[3]] ?? 'normal',
        metadata: t[4],
        body: t[5],
        mode: MODES[t[6]]!,
      };
    case 2:
      return { type: 'response', body: t[1] };
    case 3:
      return { type: 'item', body: t[1] };
    case 4:
      return { type: 'end' };
    case 5:
      return { type: 'error', code: t[1], message: t[2] };
    case 6:
      return { type: 'cancel', code: t[1], message: t[2] };
    case 7:
      return { type: 'ping', nonce: t[1] };
    case 8:
      return { type: 'pong', nonce: t[1] };
  }
}
