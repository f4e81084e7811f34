import { isErrorCode, type ErrorCode } from '../errors.js';
import type { EncodedMessage } from './message-schemas.js';

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
export const MODES: readonly CallMode[] = ['unary', 'stream', 'tunnel', 'duplex'];

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
/** Entries of a request's metadata. */
export const MAX_METADATA_ENTRIES = 64;
/** Code points of a metadata key or value, and of an error's message. */
export const MAX_TEXT = 4096;
/** Code points of an error code (unknown ones decode as UNKNOWN). */
export const MAX_CODE_LENGTH = 64;

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


/**
 * Validates a decoded value and builds the message; undefined when it is not a well-formed message. Runs on
 * every frame off the network, so it is written by hand: the rules are the zod schemas' in message-schemas.ts (the
 * specification), and a property test requires the same verdict and the same message from both on random and
 * mutated tuples. Like zod: a tuple has exactly its schema's length, numbers are finite safe integers, lengths
 * of text count code points, and the metadata is copied into a fresh object.
 */
export function tupleToMessage(value: unknown): WireMessage | undefined {
  if (!Array.isArray(value)) return undefined;
  const t: unknown[] = value;
  switch (t[0]) {
    case 1: {
      if (t.length !== 7) return undefined;
      const method = t[1];
      const timeoutMs = t[2];
      const priority = t[3];
      const mode = t[6];
      if (typeof method !== 'string' || method.length === 0 || !fitsCodePoints(method, MAX_METHOD_LENGTH)) return undefined;
      if (timeoutMs !== null && !isCount(timeoutMs)) return undefined;
      if (priority !== 0 && priority !== 1 && priority !== 2 && priority !== 3) return undefined;
      if (mode !== 0 && mode !== 1 && mode !== 2 && mode !== 3) return undefined;
      const metadata = copyMetadata(t[4]);
      if (metadata === undefined) return undefined;
      return { type: 'request', method, timeoutMs, priority: PRIORITIES[priority], metadata, body: t[5], mode: MODES[mode]! };
    }
    case 2:
      return t.length === 2 ? { type: 'response', body: t[1] } : undefined;
    case 3:
      return t.length === 2 ? { type: 'item', body: t[1] } : undefined;
    case 4:
      return t.length === 1 ? { type: 'end' } : undefined;
    case 5:
    case 6: {
      if (t.length !== 3) return undefined;
      const code = t[1];
      const message = t[2];
      if (typeof code !== 'string' || !fitsCodePoints(code, MAX_CODE_LENGTH)) return undefined;
      if (typeof message !== 'string' || !fitsCodePoints(message, MAX_TEXT)) return undefined;
      // Unknown codes from a newer peer are kept readable as UNKNOWN rather than rejected.
      return { type: t[0] === 5 ? 'error' : 'cancel', code: isErrorCode(code) ? code : 'UNKNOWN', message };
    }
    case 7:
    case 8: {
      const nonce = t[1];
      if (t.length !== 2 || !isCount(nonce)) return undefined;
      return { type: t[0] === 7 ? 'ping' : 'pong', nonce };
    }
    default:
      return undefined;
  }
}

/** A non-negative safe integer (-0 included, as zod's `int().nonnegative()` has it). */
function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

/** Whether `text` has at most `max` code points (a surrogate pair counts once, as in zod's length checks). */
function fitsCodePoints(text: string, max: number): boolean {
  const units = text.length;
  if (units <= max) return true;
  if (units > 2 * max) return false;
  let count = units;
  for (let i = 0; i < units - 1; i++) {
    if ((text.charCodeAt(i) & 0xfc00) === 0xd800 && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      count--;
      i++;
    }
  }
  return count <= max;
}

/**
 * A request's metadata checked and copied, or undefined when it is not a record of texts. Mirrors zod's
 * `z.record(string, string)`: a plain object (or one whose `constructor` is not a class's); its own enumerable
 * keys, all strings (a symbol key fails); a `__proto__` own key is left out, so it never reaches a prototype.
 */
function copyMetadata(value: unknown): Record<string, string> | undefined {
  if (!isRecordLike(value)) return undefined;
  const copy: Record<string, string> = {};
  let entries = 0;
  // Object.keys: the own enumerable string keys, in the order zod's Reflect.ownKeys walk sees them (several
  // times cheaper). Symbols never come out of msgpack, but the rule must hold for any value: an enumerable one fails.
  for (const key of Object.keys(value)) {
    if (key === '__proto__') continue;
    if (!fitsCodePoints(key, MAX_TEXT)) return undefined;
    const entry = (value as Record<string, unknown>)[key];
    if (typeof entry !== 'string' || !fitsCodePoints(entry, MAX_TEXT)) return undefined;
    copy[key] = entry;
    entries++;
  }
  for (const symbol of Object.getOwnPropertySymbols(value)) {
    if (Object.prototype.propertyIsEnumerable.call(value, symbol)) return undefined;
  }
  return entries <= MAX_METADATA_ENTRIES ? copy : undefined;
}

/**
 * What zod takes for a record: a non-array object whose `constructor` is absent, not a function, or a function
 * whose `prototype` is an object with its own `isPrototypeOf` (Object's, or one built like it). Maps, Dates,
 * typed arrays and class instances fail.
 */
function isRecordLike(value: unknown): value is object {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const constructor: unknown = (value as { constructor?: unknown }).constructor;
  if (typeof constructor !== 'function') return true;
  const prototype: unknown = constructor.prototype;
  return typeof prototype === 'object' && prototype !== null && !Array.isArray(prototype) && Object.hasOwn(prototype, 'isPrototypeOf');
}
