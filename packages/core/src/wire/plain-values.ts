import type { DecodeLimits } from './msgpack-shape.js';

/**
 * A request's body when it is a small plain value — what JSON holds (plain objects, arrays, ASCII strings, numbers,
 * booleans, null) and bytes — written and read without msgpackr, as binary bodies are (binary-frames.ts).
 *
 * Why: a streamed call is usually asked for with an object (`{ prompt, maxTokens }`), and a call's request went
 * through msgpackr's generic pack on one side and the shape check, msgpackr's unpack and the tuple check on the
 * other. Where calls with object bodies are rare next to the rest of the traffic (a stream's request among many
 * binary calls, agentbench's burst among its echoes), that code runs at the JIT's lower tiers: measured 20–40 µs per
 * side on the way to a stream's first item, the largest step of it (docs/performance-log.md, "A streamed call's first
 * item against a unary call"). This path is short and shares the request's hand-written envelope, which every
 * binary call keeps hot.
 *
 * The bytes are the ones msgpackr writes with the codec's settings (map 16 for every object, the smallest integer,
 * float 64 for any other number, nil for undefined), so any peer reads them; the reader takes exactly these shapes
 * and gives what msgpackr gives for them (a `__proto__` key becomes `__proto_`, bin is a view of the frame's bytes),
 * else undefined, and the frame takes the general path. A property test holds both sides to msgpackr's.
 */

/** Containers nested in a body this path takes (the general path allows 31: msgpack-shape.ts). */
export const MAX_PLAIN_DEPTH = 8;
/** Containers in a body this path takes (the general path allows 262,143). */
export const MAX_PLAIN_CONTAINERS = 256;
/** Bytes of a body this path writes: larger bodies spread msgpackr's fixed costs over enough bytes. */
export const MAX_PLAIN_BYTES = 8 * 1024;

/** Where a body is written before the frame's size is known: each value is read once, as msgpackr reads it. */
const scratch = Buffer.allocUnsafeSlow(MAX_PLAIN_BYTES);
const objectHasOwnProperty = Object.prototype.hasOwnProperty;

/** Containers written so far in the body being written. */
let containers = 0;

/**
 * Writes `value` as MessagePack into a shared scratch buffer; returns its bytes (valid until the next call) or
 * undefined when the value is not a plain value this path takes (then nothing counts).
 */
export function writePlainBody(value: unknown): Buffer | undefined {
  // A getter that encodes another message while this one is written (it sends a call) must not write over this
  // one's scratch: that inner one takes the general path.
  if (writing) return undefined;
  writing = true;
  containers = 0;
  try {
    const end = writeValue(value, 0, 0);
    return end < 0 ? undefined : scratch.subarray(0, end);
  } finally {
    writing = false;
  }
}

/** A body is being written into the scratch (see `writePlainBody`). */
let writing = false;

/** Writes one value at `at`; returns the offset after it, or -1. */
function writeValue(value: unknown, at: number, depth: number): number {
  if (at >= MAX_PLAIN_BYTES) return -1;
  switch (typeof value) {
    case 'undefined':
      scratch[at] = 0xc0; // the codec's encodeUndefinedAsNil
      return at + 1;
    case 'boolean':
      scratch[at] = value ? 0xc3 : 0xc2;
      return at + 1;
    case 'number':
      return writeNumber(value, at);
    case 'string':
      return writeAscii(value, at);
    case 'object':
      if (value === null) {
        scratch[at] = 0xc0;
        return at + 1;
      }
      return writeObject(value, at, depth);
    default:
      return -1;
  }
}

/** msgpackr's rules: an unsigned 32-bit integer, a signed one, else float 64 (-0 is written as 0, as msgpackr does). */
function writeNumber(value: number, at: number): number {
  if (at + 9 > MAX_PLAIN_BYTES) return -1;
  if (value >>> 0 === value) {
    if (value < 0x80) {
      scratch[at] = value;
      return at + 1;
    }
    if (value < 0x100) {
      scratch[at] = 0xcc;
      scratch[at + 1] = value;
      return at + 2;
    }
    if (value < 0x10000) {
      scratch[at] = 0xcd;
      scratch.writeUInt16BE(value, at + 1);
      return at + 3;
    }
    scratch[at] = 0xce;
    scratch.writeUInt32BE(value, at + 1);
    return at + 5;
  }
  if (value >> 0 === value) {
    if (value >= -0x20) {
      scratch[at] = 0x100 + value;
      return at + 1;
    }
    if (value >= -0x80) {
      scratch[at] = 0xd0;
      scratch[at + 1] = value + 0x100;
      return at + 2;
    }
    if (value >= -0x8000) {
      scratch[at] = 0xd1;
      scratch.writeInt16BE(value, at + 1);
      return at + 3;
    }
    scratch[at] = 0xd2;
    scratch.writeInt32BE(value, at + 1);
    return at + 5;
  }
  scratch[at] = 0xcb;
  scratch.writeDoubleBE(value, at + 1);
  return at + 9;
}

/** An ASCII string (fixstr, str 8, str 16 by length, as msgpackr chooses); -1 for any other text. */
function writeAscii(text: string, at: number): number {
  const length = text.length;
  const header = length < 0x20 ? 1 : length < 0x100 ? 2 : 3;
  if (at + header + length > MAX_PLAIN_BYTES) return -1;
  let to = at + header;
  for (let i = 0; i < length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0x80) return -1;
    scratch[to++] = unit;
  }
  if (header === 1) {
    scratch[at] = 0xa0 | length;
  } else if (header === 2) {
    scratch[at] = 0xd9;
    scratch[at + 1] = length;
  } else {
    scratch[at] = 0xda;
    scratch.writeUInt16BE(length, at + 1);
  }
  return to;
}

/** Bytes (bin), an array, or a plain object (map 16 of its own enumerable keys, as msgpackr walks them). */
function writeObject(value: object, at: number, depth: number): number {
  const constructor = (value as { constructor?: unknown }).constructor;
  // Bytes are what msgpackr takes for bytes: a real Uint8Array or Buffer (its typed-array extension), not an
  // object whose own `constructor` names one (msgpackr writes that as a map), nor a Proxy of one (whose length
  // getter throws: msgpackr's to refuse).
  if ((constructor === Uint8Array || constructor === Buffer) && ArrayBuffer.isView(value) && value instanceof Uint8Array) {
    return writeBytes(value, at);
  }
  if (depth >= MAX_PLAIN_DEPTH || ++containers > MAX_PLAIN_CONTAINERS) return -1;
  if (constructor === Array) {
    const array = value as unknown[];
    const length = array.length;
    if (length >= 0x10000 || at + 3 > MAX_PLAIN_BYTES) return -1;
    if (length < 0x10) {
      scratch[at++] = 0x90 | length;
    } else {
      scratch[at] = 0xdc;
      scratch.writeUInt16BE(length, at + 1);
      at += 3;
    }
    for (let i = 0; i < length && at >= 0; i++) at = writeValue(array[i], at, depth + 1);
    return at;
  }
  // msgpackr's test for a plain object, and its walk: for-in, own keys only (its check is `hasOwnProperty`, so an
  // object that replaces that is left to msgpackr).
  const record = value as Record<string, unknown>;
  if (constructor !== Object || record.hasOwnProperty !== objectHasOwnProperty || at + 3 > MAX_PLAIN_BYTES) return -1;
  const sizeAt = at;
  at += 3;
  let size = 0;
  for (const key in record) {
    if (!Object.hasOwn(record, key)) continue;
    at = writeAscii(key, at);
    if (at < 0) return -1;
    at = writeValue(record[key], at, depth + 1);
    if (at < 0) return -1;
    size++;
  }
  if (size >= 0x10000) return -1;
  scratch[sizeAt] = 0xde;
  scratch.writeUInt16BE(size, sizeAt + 1);
  return at;
}

function writeBytes(bytes: Uint8Array, at: number): number {
  // msgpackr's length for bytes (an own `length` property does not hide it; `set` copies this many).
  const length = bytes.byteLength;
  const header = length < 0x100 ? 2 : 3;
  if (at + header + length > MAX_PLAIN_BYTES) return -1;
  if (header === 2) {
    scratch[at] = 0xc4;
    scratch[at + 1] = length;
  } else {
    scratch[at] = 0xc5;
    scratch.writeUInt16BE(length, at + 1);
  }
  scratch.set(bytes, at + header);
  return at + header + length;
}

/** What `readPlainValue` returns for bytes it does not take. */
export const NOT_PLAIN: unique symbol = Symbol('not a plain value');

/** Where the value `readPlainValue` read last ends. */
export let plainValueEnd = 0;

/** Read state of one value: its bytes, their end, the nesting and containers allowed (no object per read). */
let src: Uint8Array = new Uint8Array(0);
let srcEnd = 0;
let position = 0;
let maxDepth = 0;
let containersLeft = 0;
/** `src` is a Buffer (what receivers read frames from), whose latin1 decoder makes a long text. */
let srcIsBuffer = false;

/**
 * Reads a request's body at `at`, of the shapes `writePlainBody` writes (and fixmap, which other writers use for
 * small objects), bounded by `end`, within `limits` less the request's own containers; NOT_PLAIN for anything else.
 * `plainValueEnd` then says where it ended.
 */
export function readPlainValue(bytes: Uint8Array, at: number, end: number, limits: Readonly<DecodeLimits>): unknown {
  // A larger body is none this side writes: msgpackr's to read, so this path's work per frame stays small.
  if (end - at > MAX_PLAIN_BYTES) return NOT_PLAIN;
  src = bytes;
  srcIsBuffer = Buffer.isBuffer(bytes);
  srcEnd = end;
  position = at;
  // The message's own array holds the body (one level); it and the request's metadata map are two containers.
  maxDepth = Math.min(MAX_PLAIN_DEPTH, limits.maxDepth - 1);
  containersLeft = Math.min(MAX_PLAIN_CONTAINERS, limits.maxContainers - 2);
  const value = readValue(0);
  plainValueEnd = position;
  src = EMPTY; // holds no frame's bytes between reads
  return value;
}

const EMPTY = new Uint8Array(0);

function readValue(depth: number): unknown {
  if (position >= srcEnd) return NOT_PLAIN;
  const byte = src[position++]!;
  if (byte < 0x80) return byte;
  if (byte >= 0xe0) return byte - 0x100;
  if (byte >= 0xa0 && byte <= 0xbf) return readAscii(byte - 0xa0);
  if (byte >= 0x80 && byte <= 0x8f) return readMap(byte - 0x80, depth);
  if (byte >= 0x90 && byte <= 0x9f) return readArray(byte - 0x90, depth);
  switch (byte) {
    case 0xc0:
      return null;
    case 0xc2:
      return false;
    case 0xc3:
      return true;
    case 0xcc:
      return fixed(1) ? src[position - 1]! : NOT_PLAIN;
    case 0xcd:
      return fixed(2) ? u16(position - 2) : NOT_PLAIN;
    case 0xce:
      return fixed(4) ? u32(position - 4) : NOT_PLAIN;
    case 0xd0:
      return fixed(1) ? (src[position - 1]! << 24) >> 24 : NOT_PLAIN;
    case 0xd1:
      return fixed(2) ? (u16(position - 2) << 16) >> 16 : NOT_PLAIN;
    case 0xd2:
      return fixed(4) ? u32(position - 4) | 0 : NOT_PLAIN;
    case 0xcb:
      return fixed(8) ? new DataView(src.buffer, src.byteOffset + position - 8, 8).getFloat64(0) : NOT_PLAIN;
    case 0xd9:
      return fixed(1) ? readAscii(src[position - 1]!) : NOT_PLAIN;
    case 0xda:
      return fixed(2) ? readAscii(u16(position - 2)) : NOT_PLAIN;
    case 0xc4:
      return fixed(1) ? readBytes(src[position - 1]!) : NOT_PLAIN;
    case 0xc5:
      return fixed(2) ? readBytes(u16(position - 2)) : NOT_PLAIN;
    case 0xde:
      return fixed(2) ? readMap(u16(position - 2), depth) : NOT_PLAIN;
    case 0xdc:
      return fixed(2) ? readArray(u16(position - 2), depth) : NOT_PLAIN;
    default:
      return NOT_PLAIN;
  }
}

/** Steps over `bytes` bytes of a fixed-size field; false when they run past the end. */
function fixed(bytes: number): boolean {
  if (position + bytes > srcEnd) return false;
  position += bytes;
  return true;
}

function u16(at: number): number {
  return (src[at]! << 8) | src[at + 1]!;
}

function u32(at: number): number {
  return src[at]! * 0x1000000 + ((src[at + 1]! << 16) | (src[at + 2]! << 8) | src[at + 3]!);
}

/** Text this long and longer is made in one step; shorter, a character at a time (V8 copies below 13). */
const SHORT_TEXT = 12;

/** `length` bytes of ASCII text (msgpackr's string for them); NOT_PLAIN for other bytes or past the end. */
function readAscii(length: number): string | typeof NOT_PLAIN {
  const start = position;
  const stop = start + length;
  if (stop > srcEnd) return NOT_PLAIN;
  let text = '';
  if (length <= SHORT_TEXT) {
    for (let i = start; i < stop; i++) {
      const byte = src[i]!;
      if (byte >= 0x80) return NOT_PLAIN;
      text += String.fromCharCode(byte);
    }
  } else {
    // Longer text built by `+=` is a chain of cons strings, ~30 bytes of heap per character: a peer's frame of
    // long strings held tens of times its size. One flat string instead, as msgpackr makes.
    for (let i = start; i < stop; i++) if (src[i]! >= 0x80) return NOT_PLAIN;
    // Buffer's latin1 decoder (ASCII checked above): a third of fromCharCode.apply's time for 30-50 characters.
    // (Its undocumented `latin1Slice` skips toString's argument checks; not worth depending on for bodies ≤ 8 KiB.)
    text = srcIsBuffer ? (src as Buffer).toString('latin1', start, stop) : String.fromCharCode.apply(null, src.subarray(start, stop) as unknown as number[]);
  }
  position = stop;
  return text;
}

/** A view of the frame's bytes, as msgpackr gives a bin (a Buffer's subarray is a Buffer). */
function readBytes(length: number): Uint8Array | typeof NOT_PLAIN {
  const start = position;
  if (start + length > srcEnd) return NOT_PLAIN;
  position += length;
  return src.subarray(start, start + length);
}

function enter(depth: number, values: number): boolean {
  // Each value takes a byte at least: a length past what is left is refused here, as the shape check refuses it.
  return depth < maxDepth && --containersLeft >= 0 && values <= srcEnd - position;
}

function readArray(length: number, depth: number): unknown[] | typeof NOT_PLAIN {
  if (!enter(depth, length)) return NOT_PLAIN;
  const array: unknown[] = [];
  for (let i = 0; i < length; i++) {
    const value = readValue(depth + 1);
    if (value === NOT_PLAIN) return NOT_PLAIN;
    array.push(value);
  }
  return array;
}

/** An object of a map whose keys are ASCII strings (other keys: msgpackr's to read); `__proto__` as `__proto_`. */
function readMap(size: number, depth: number): Record<string, unknown> | typeof NOT_PLAIN {
  if (!enter(depth, 2 * size)) return NOT_PLAIN;
  const object: Record<string, unknown> = {};
  for (let i = 0; i < size; i++) {
    if (position >= srcEnd) return NOT_PLAIN;
    const marker = src[position++]!;
    let key: string | typeof NOT_PLAIN;
    if (marker >= 0xa0 && marker <= 0xbf) key = readAscii(marker - 0xa0);
    else if (marker === 0xd9 && fixed(1)) key = readAscii(src[position - 1]!);
    else if (marker === 0xda && fixed(2)) key = readAscii(u16(position - 2));
    else return NOT_PLAIN;
    if (key === NOT_PLAIN) return NOT_PLAIN;
    const value = readValue(depth + 1);
    if (value === NOT_PLAIN) return NOT_PLAIN;
    object[key === '__proto__' ? '__proto_' : key] = value;
  }
  return object;
}
