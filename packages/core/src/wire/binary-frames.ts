import type { CallMode, Priority, WireMessage } from './messages.js';
import { MODES, PRIORITIES } from './messages.js';
import { allocFrame } from './frame-slab.js';

/**
 * The frames of a call with a binary body, written and read without msgpackr: a `request` whose metadata is empty
 * and whose method is short ASCII, and a `response` or `item` whose body is a Uint8Array. They are most of a
 * busy agent's frames, and msgpackr cost ~2–3 µs per 1 KB call on each side (a tuple, a pack into its buffer, a
 * shape check and an unpack with its string cache) — as much as the rest of the frame path.
 *
 * The bytes are plain MessagePack, the same a msgpackr peer writes for these values (bin 8/16/32 by length, fixstr
 * or str 8, the smallest unsigned integer), so any peer reads them; the readers below take exactly these shapes,
 * filling the payload, and return undefined for anything else (which then takes the general path: msgpackr and
 * `tupleToMessage`). What they return is what the general path gives for the same bytes (a property test holds
 * them to it, on random and mutated frames).
 */

/** A method name the fast request path writes: 1–255 ASCII characters (fixstr or str 8). */
const MAX_FAST_METHOD = 255;
/** The largest deadline written as an unsigned integer here (u32); a larger one takes the general path. */
const MAX_U32 = 0xffff_ffff;

/** The frame (u32 length + payload) of a request, response or item with a binary body; undefined when another kind. */
export function encodeBinaryFrame(message: WireMessage): Buffer | undefined {
  switch (message.type) {
    case 'response':
    case 'item': {
      const body = message.body;
      if (!(body instanceof Uint8Array)) return undefined;
      const head = binHeaderBytes(body.length);
      const frame = allocFrame(4 + 2 + head + body.length);
      frame.writeUInt32BE(frame.length - 4, 0);
      frame[4] = 0x92;
      frame[5] = message.type === 'response' ? 2 : 3;
      writeBin(frame, 6, body);
      return frame;
    }
    case 'request':
      return encodeBinaryRequest(message);
    default:
      return undefined;
  }
}

function encodeBinaryRequest(message: Extract<WireMessage, { type: 'request' }>): Buffer | undefined {
  const { method, timeoutMs, body } = message;
  if (!(body instanceof Uint8Array) || !isEmpty(message.metadata)) return undefined;
  const methodLength = method.length;
  if (methodLength === 0 || methodLength > MAX_FAST_METHOD) return undefined;
  for (let i = 0; i < methodLength; i++) if (method.charCodeAt(i) >= 0x80) return undefined;
  if (timeoutMs !== null && !(Number.isInteger(timeoutMs) && timeoutMs >= 0 && timeoutMs <= MAX_U32)) return undefined;
  const methodHead = methodLength < 32 ? 1 : 2;
  const timeoutBytes = timeoutMs === null || timeoutMs < 0x80 ? 1 : timeoutMs < 0x100 ? 2 : timeoutMs < 0x10000 ? 3 : 5;
  const bodyHead = binHeaderBytes(body.length);
  // u32 length, fixarray 7, type 1, method, timeout, priority, {} (map 16 of 0 entries, as msgpackr writes every
  // object), body, mode
  const frame = allocFrame(4 + 2 + methodHead + methodLength + timeoutBytes + 1 + 3 + bodyHead + body.length + 1);
  frame.writeUInt32BE(frame.length - 4, 0);
  frame[4] = 0x97;
  frame[5] = 0x01;
  let at = 6;
  if (methodHead === 1) {
    frame[at++] = 0xa0 | methodLength;
  } else {
    frame[at++] = 0xd9;
    frame[at++] = methodLength;
  }
  // A JS loop: Buffer#write's latin1 path crosses into C++, ~1 µs for a short name (profile of call-cost).
  for (let i = 0; i < methodLength; i++) frame[at++] = method.charCodeAt(i);
  if (timeoutMs === null) {
    frame[at++] = 0xc0;
  } else if (timeoutBytes === 1) {
    frame[at++] = timeoutMs;
  } else if (timeoutBytes === 2) {
    frame[at++] = 0xcc;
    frame[at++] = timeoutMs;
  } else if (timeoutBytes === 3) {
    frame[at++] = 0xcd;
    frame.writeUInt16BE(timeoutMs, at);
    at += 2;
  } else {
    frame[at++] = 0xce;
    frame.writeUInt32BE(timeoutMs, at);
    at += 4;
  }
  frame[at++] = PRIORITIES.indexOf(message.priority);
  frame[at++] = 0xde;
  frame[at++] = 0;
  frame[at++] = 0;
  at = writeBin(frame, at, body);
  frame[at] = MODES.indexOf(message.mode);
  return frame;
}

/**
 * Reads a payload (without its length) of the shapes `encodeBinaryFrame` writes; undefined for anything else.
 * Bodies are views of the payload, as msgpackr gives them.
 */
export function decodeBinaryFrame(payload: Uint8Array): WireMessage | undefined {
  const kind = payload[1];
  if (payload[0] === 0x92 && (kind === 2 || kind === 3)) {
    const body = readBin(payload, 2);
    if (body === undefined || body.end !== payload.length) return undefined;
    return kind === 2 ? { type: 'response', body: body.bytes } : { type: 'item', body: body.bytes };
  }
  if (payload[0] === 0x97 && kind === 1) return decodeBinaryRequest(payload);
  return undefined;
}

function decodeBinaryRequest(payload: Uint8Array): WireMessage | undefined {
  const length = payload.length;
  let at = 2;
  const marker = payload[at++];
  let methodLength: number;
  if (marker === undefined) return undefined;
  if (marker > 0xa0 && marker <= 0xbf) methodLength = marker - 0xa0;
  else if (marker === 0xd9 && at < length) methodLength = payload[at++]!;
  else return undefined;
  if (methodLength === 0 || at + methodLength > length) return undefined;
  const method = readAsciiMethod(payload, at, methodLength);
  if (method === undefined) return undefined;
  at += methodLength;
  const timeoutMarker = payload[at++];
  let timeoutMs: number | null;
  if (timeoutMarker === undefined) return undefined;
  if (timeoutMarker === 0xc0) timeoutMs = null;
  else if (timeoutMarker < 0x80) timeoutMs = timeoutMarker;
  else if (timeoutMarker === 0xcc && at + 1 <= length) timeoutMs = payload[at++]!;
  else if (timeoutMarker === 0xcd && at + 2 <= length) {
    timeoutMs = payload.readUInt16BE(at);
    at += 2;
  } else if (timeoutMarker === 0xce && at + 4 <= length) {
    timeoutMs = payload.readUInt32BE(at);
    at += 4;
  } else return undefined;
  const priority = payload[at++];
  if (priority === undefined || priority > 3) return undefined;
  // No metadata: map 16 of 0 entries (msgpackr's way) or fixmap 0.
  if (payload[at] === 0x80) at += 1;
  else if (payload[at] === 0xde && payload[at + 1] === 0 && payload[at + 2] === 0) at += 3;
  else return undefined;
  const body = readBin(payload, at);
  if (body === undefined || body.end + 1 !== length) return undefined;
  const mode = payload[body.end]!;
  if (mode > 3) return undefined;
  return {
    type: 'request',
    method,
    timeoutMs,
    priority: PRIORITIES[priority] as Priority,
    metadata: {},
    body: body.bytes,
    mode: MODES[mode] as CallMode,
  };
}

/** The method name read last, and its bytes: a busy peer calls few methods, so most reads are this one again. */
let lastMethod = '';
let lastMethodBytes = new Uint8Array(0);

/**
 * `length` ASCII bytes at `at` as a string (undefined if one is not ASCII), without Buffer#toString's crossing into
 * C++ (~0.9 µs per call in a profile of call-cost): the last name read is reused when the bytes are the same.
 */
function readAsciiMethod(payload: Uint8Array, at: number, length: number): string | undefined {
  if (length === lastMethodBytes.length) {
    let same = true;
    for (let i = 0; i < length; i++) {
      if (payload[at + i] !== lastMethodBytes[i]) {
        same = false;
        break;
      }
    }
    if (same) return lastMethod;
  }
  let method = '';
  for (let i = at; i < at + length; i++) {
    const byte = payload[i]!;
    if (byte >= 0x80) return undefined;
    method += String.fromCharCode(byte);
  }
  lastMethod = method;
  lastMethodBytes = payload.slice(at, at + length);
  return method;
}

/** A `bin` at `at`: its bytes (a view) and where it ends; undefined when the header is not bin or overruns. */
function readBin(payload: Uint8Array, at: number): { bytes: Uint8Array; end: number } | undefined {
  const marker = payload[at];
  let start: number;
  let length: number;
  if (marker === 0xc4 && at + 2 <= payload.length) {
    start = at + 2;
    length = payload[at + 1]!;
  } else if (marker === 0xc5 && at + 3 <= payload.length) {
    start = at + 3;
    length = (payload[at + 1]! << 8) | payload[at + 2]!;
  } else if (marker === 0xc6 && at + 5 <= payload.length) {
    start = at + 5;
    length = ((payload[at + 1]! << 24) >>> 0) + ((payload[at + 2]! << 16) | (payload[at + 3]! << 8) | payload[at + 4]!);
  } else {
    return undefined;
  }
  const end = start + length;
  if (end > payload.length) return undefined;
  return { bytes: payload.subarray(start, end), end };
}

/** msgpack's bin header size for a body of `length` bytes: bin 8, bin 16 or bin 32 (as msgpackr chooses). */
function binHeaderBytes(length: number): number {
  return length < 0x100 ? 2 : length < 0x10000 ? 3 : 5;
}

function writeBin(frame: Buffer, at: number, body: Uint8Array): number {
  const length = body.length;
  if (length < 0x100) {
    frame[at++] = 0xc4;
    frame[at++] = length;
  } else if (length < 0x10000) {
    frame[at++] = 0xc5;
    frame.writeUInt16BE(length, at);
    at += 2;
  } else {
    frame[at++] = 0xc6;
    frame.writeUInt32BE(length, at);
    at += 4;
  }
  frame.set(body, at);
  return at + length;
}

/** Whether a metadata record has no own enumerable keys (the common case: no metadata given). */
function isEmpty(metadata: Record<string, string>): boolean {
  for (const key in metadata) if (Object.hasOwn(metadata, key)) return false;
  return true;
}
