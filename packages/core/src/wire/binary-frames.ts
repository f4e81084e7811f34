import type { CallMode, Priority, WireMessage } from './messages.js';
import { MODES, PRIORITIES } from './messages.js';
import { allocFrame } from './frame-slab.js';
import type { BufferViews } from '../util/bytes.js';
import { DEFAULT_DECODE_LIMITS, type DecodeLimits } from './msgpack-shape.js';
import { NOT_PLAIN, plainValueEnd, readPlainValue, writePlainBody } from './plain-values.js';

/**
 * The frames of a call with a binary body, written and read without msgpackr: a `request` whose metadata is empty
 * and whose method is short ASCII (its body binary, or a small plain value: plain-values.ts), and a `response` or
 * `item` whose body is a Uint8Array. They are most of a
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
  const { method, timeoutMs } = message;
  if (!isEmpty(message.metadata)) return undefined;
  const methodLength = method.length;
  if (methodLength === 0 || methodLength > MAX_FAST_METHOD) return undefined;
  for (let i = 0; i < methodLength; i++) if (method.charCodeAt(i) >= 0x80) return undefined;
  if (timeoutMs !== null && !(Number.isInteger(timeoutMs) && timeoutMs >= 0 && timeoutMs <= MAX_U32)) return undefined;
  // A binary body is framed here; any other is written (if plain) where it is read once, then copied in.
  const binary = message.body instanceof Uint8Array ? message.body : undefined;
  const plain = binary ? undefined : writePlainBody(message.body);
  if (!binary && !plain) return undefined;
  const body = (binary ?? plain)!;
  const methodHead = methodLength < 32 ? 1 : 2;
  const timeoutBytes = timeoutMs === null || timeoutMs < 0x80 ? 1 : timeoutMs < 0x100 ? 2 : timeoutMs < 0x10000 ? 3 : 5;
  const bodyHead = binary ? binHeaderBytes(body.length) : 0;
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
  frame[at++] = priorityIndex(message.priority);
  frame[at++] = 0xde;
  frame[at++] = 0;
  frame[at++] = 0;
  if (binary) {
    at = writeBin(frame, at, body);
  } else {
    frame.set(body, at);
    at += body.length;
  }
  frame[at] = modeIndex(message.mode);
  return frame;
}

/**
 * Reads a payload (without its length) of the shapes `encodeBinaryFrame` writes, in `bytes` from `start` to `end`
 * (the whole of `bytes` by default: a receiver may read a frame where it lies, without a view of its payload);
 * undefined for anything else. Bodies are views of the bytes, as msgpackr gives them (made by `views` when given:
 * the views of `bytes` a reader of many frames of one chunk makes without `subarray`).
 */
export function decodeBinaryFrame(
  bytes: Uint8Array,
  start = 0,
  end = bytes.length,
  views?: BufferViews,
  /** What the frame may nest (a plain body's containers count): the decoder's limits. */
  limits: Readonly<DecodeLimits> = DEFAULT_DECODE_LIMITS,
): WireMessage | undefined {
  if (end - start < 2) return undefined;
  const first = bytes[start];
  const kind = bytes[start + 1];
  if (first === 0x92 && (kind === 2 || kind === 3)) {
    const body = readBin(bytes, start + 2, end, views);
    if (body === undefined || body.end !== end) return undefined;
    return kind === 2 ? { type: 'response', body: body.bytes } : { type: 'item', body: body.bytes };
  }
  if (first === 0x97 && kind === 1) return decodeBinaryRequest(bytes, start, end, limits);
  return undefined;
}

/** Every read below is bounded by `end` explicitly: the bytes past it may be another frame's. */
function decodeBinaryRequest(bytes: Uint8Array, start: number, end: number, limits: Readonly<DecodeLimits>): WireMessage | undefined {
  // The request's array holds its metadata map: two containers, two levels, whatever the body.
  if (limits.maxDepth < 2 || limits.maxContainers < 2) return undefined;
  let at = start + 2;
  if (at >= end) return undefined;
  const marker = bytes[at++]!;
  let methodLength: number;
  if (marker > 0xa0 && marker <= 0xbf) methodLength = marker - 0xa0;
  else if (marker === 0xd9 && at < end) methodLength = bytes[at++]!;
  else return undefined;
  if (methodLength === 0 || at + methodLength > end) return undefined;
  const method = readAsciiMethod(bytes, at, methodLength);
  if (method === undefined) return undefined;
  at += methodLength;
  if (at >= end) return undefined;
  const timeoutMarker = bytes[at++]!;
  let timeoutMs: number | null;
  if (timeoutMarker === 0xc0) timeoutMs = null;
  else if (timeoutMarker < 0x80) timeoutMs = timeoutMarker;
  else if (timeoutMarker === 0xcc && at + 1 <= end) timeoutMs = bytes[at++]!;
  else if (timeoutMarker === 0xcd && at + 2 <= end) {
    timeoutMs = (bytes[at]! << 8) | bytes[at + 1]!;
    at += 2;
  } else if (timeoutMarker === 0xce && at + 4 <= end) {
    timeoutMs = bytes[at]! * 0x1000000 + ((bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!);
    at += 4;
  } else return undefined;
  if (at >= end) return undefined;
  const priority = bytes[at++]!;
  if (priority > 3) return undefined;
  // No metadata: map 16 of 0 entries (msgpackr's way) or fixmap 0.
  if (at < end && bytes[at] === 0x80) at += 1;
  else if (at + 3 <= end && bytes[at] === 0xde && bytes[at + 1] === 0 && bytes[at + 2] === 0) at += 3;
  else return undefined;
  let body: unknown;
  let bodyEnd: number;
  const bin = at < end && bytes[at]! >= 0xc4 && bytes[at]! <= 0xc6 ? readBin(bytes, at, end) : undefined;
  if (bin) {
    body = bin.bytes;
    bodyEnd = bin.end;
  } else {
    // The mode's byte follows the body: a body that reaches the frame's end is not this shape.
    body = readPlainValue(bytes, at, end - 1, limits);
    if (body === NOT_PLAIN) return undefined;
    bodyEnd = plainValueEnd;
  }
  if (bodyEnd + 1 !== end) return undefined;
  const mode = bytes[bodyEnd]!;
  if (mode > 3) return undefined;
  return {
    type: 'request',
    method,
    timeoutMs,
    priority: PRIORITIES[priority] as Priority,
    metadata: {},
    body,
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
  // A copy: Buffer#slice is a view, and bytes that changed under a cached view would name the wrong method.
  lastMethodBytes = new Uint8Array(payload.subarray(at, at + length));
  return method;
}

/** A `bin` at `at`: its bytes (a view) and where it ends; undefined when the header is not bin or overruns `end`. */
function readBin(bytes: Uint8Array, at: number, end: number, views?: BufferViews): { bytes: Uint8Array; end: number } | undefined {
  const marker = bytes[at];
  let start: number;
  let length: number;
  if (marker === 0xc4 && at + 2 <= end) {
    start = at + 2;
    length = bytes[at + 1]!;
  } else if (marker === 0xc5 && at + 3 <= end) {
    start = at + 3;
    length = (bytes[at + 1]! << 8) | bytes[at + 2]!;
  } else if (marker === 0xc6 && at + 5 <= end) {
    start = at + 5;
    length = ((bytes[at + 1]! << 24) >>> 0) + ((bytes[at + 2]! << 16) | (bytes[at + 3]! << 8) | bytes[at + 4]!);
  } else {
    return undefined;
  }
  const stop = start + length;
  if (stop > end) return undefined;
  return { bytes: views ? views.view(start, stop) : bytes.subarray(start, stop), end: stop };
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

/**
 * PRIORITIES.indexOf and MODES.indexOf as switches: a request's two enums are written on every call, and
 * `indexOf` is a call into a builtin each time where a switch on the (internalized) strings compiles to compares.
 */
function priorityIndex(priority: Priority): number {
  switch (priority) {
    case 'critical':
      return 0;
    case 'high':
      return 1;
    case 'normal':
      return 2;
    default:
      return PRIORITIES.indexOf(priority);
  }
}

function modeIndex(mode: CallMode): number {
  switch (mode) {
    case 'unary':
      return 0;
    case 'stream':
      return 1;
    default:
      return MODES.indexOf(mode);
  }
}
