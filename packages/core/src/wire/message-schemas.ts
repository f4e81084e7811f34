import { z } from 'zod';
import { isErrorCode, type ErrorCode } from '../errors.js';
import { MAX_CODE_LENGTH, MAX_METADATA_ENTRIES, MAX_METHOD_LENGTH, MAX_TEXT, MessageType, MODES, PRIORITIES, type WireMessage } from './messages.js';

/**
 * The wire protocol's tuples as zod schemas: the specification of what a peer may send (docs/protocol.md).
 * Frames are not checked with these at run time: `tupleToMessage` (messages.ts) is a hand-written decoder of the
 * same rules, about 10× cheaper per frame, and a property test (test/wire-schemas.test.ts) feeds both the same
 * random and mutated tuples and requires the same verdicts and the same decoded messages. Change a rule here and
 * there together; the test fails until they agree.
 */
const method = z.string().min(1).max(MAX_METHOD_LENGTH);
const timeoutMs = z.number().int().nonnegative().nullable();
const priorityIndex = z.number().int().min(0).max(PRIORITIES.length - 1);
const metadata = z
  .record(z.string().max(MAX_TEXT), z.string().max(MAX_TEXT))
  .refine((m) => Object.keys(m).length <= MAX_METADATA_ENTRIES, 'too many metadata entries');
const modeIndex = z.union([z.literal(0), z.literal(1), z.literal(2), z.literal(3)]);
/** Unknown codes from a newer peer are kept readable as UNKNOWN rather than rejected. */
const code = z.string().max(MAX_CODE_LENGTH).transform((c): ErrorCode => (isErrorCode(c) ? c : 'UNKNOWN'));
const text = z.string().max(MAX_TEXT);
const nonce = z.number().int().nonnegative();

/** Schemas of the encoded tuples, by message type number. */
export const WIRE_SCHEMAS = {
  [MessageType.request]: z.tuple([z.literal(1), method, timeoutMs, priorityIndex, metadata, z.unknown(), modeIndex]),
  [MessageType.response]: z.tuple([z.literal(2), z.unknown()]),
  [MessageType.item]: z.tuple([z.literal(3), z.unknown()]),
  [MessageType.end]: z.tuple([z.literal(4)]),
  [MessageType.error]: z.tuple([z.literal(5), code, text]),
  [MessageType.cancel]: z.tuple([z.literal(6), code, text]),
  [MessageType.ping]: z.tuple([z.literal(7), nonce]),
  [MessageType.pong]: z.tuple([z.literal(8), nonce]),
} as const;

type Schemas = typeof WIRE_SCHEMAS;
/** A message as its tuple on the wire, before msgpack. */
export type EncodedMessage = { [K in keyof Schemas]: z.input<Schemas[K]> }[keyof Schemas];

/** Decodes a tuple by the zod schemas (the specification); undefined when it is not a well-formed message. */
export function tupleToMessageBySchema(value: unknown): WireMessage | undefined {
  if (!Array.isArray(value)) return undefined;
  const type: unknown = value[0];
  // Own properties only: a type like 'constructor' or '__proto__' must not find Object.prototype's members.
  if (typeof type !== 'number' || !Object.hasOwn(WIRE_SCHEMAS, type)) return undefined;
  const parsed = WIRE_SCHEMAS[type as keyof Schemas].safeParse(value);
  if (!parsed.success) return undefined;
  const t = parsed.data;
  switch (t[0]) {
    case 1:
      return { type: 'request', method: t[1], timeoutMs: t[2], priority: PRIORITIES[t[3]] ?? 'normal', metadata: t[4], body: t[5], mode: MODES[t[6]]! };
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
