/**
 * Deterministic hostile inputs for the decoder path (FrameDecoder.feed/next + decodePayloadAt): valid messages of
 * every type mutated byte by byte, random bytes, and shapes built to hurt (deep nesting, huge declared lengths,
 * extension types, prototype keys, container floods, 64-bit integers). Each input is the chunks a peer would send.
 */
import { encodeFrame, type WireMessage } from '../../src/transport.js';

/** mulberry32: small, fast, seedable; the same seed gives the same million inputs. */
export class Rng {
  constructor(private state: number) {}

  u32(): number {
    this.state = (this.state + 0x6d2b79f5) | 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor((this.u32() / 0x100000000) * n);
  }

  chance(p: number): boolean {
    return this.u32() / 0x100000000 < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  bytes(n: number): Buffer {
    const out = Buffer.allocUnsafe(n);
    for (let i = 0; i < n; i++) out[i] = this.u32() & 0xff;
    return out;
  }
}

export const PROTOTYPE_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty'] as const;
const EXTENSION_BYTES = [0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xc7, 0xc8, 0xc9] as const;
/** Bytes that change how a decoder reads what follows: lengths, containers, extensions, the unused 0xc1. */
const INTERESTING_BYTES = [0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc4, 0xc5, 0xc6, 0xca, 0xcb, 0xcf, 0xd3, 0xd9, 0xda, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0xff, ...EXTENSION_BYTES];

// --- raw MessagePack writers, for shapes msgpackr would never produce (own `__proto__` keys, lies about lengths)

function str(text: string): Buffer {
  const bytes = Buffer.from(text);
  if (bytes.length < 32) return Buffer.concat([Buffer.from([0xa0 | bytes.length]), bytes]);
  const head = Buffer.from([0xda, 0, 0]);
  head.writeUInt16BE(bytes.length, 1);
  return Buffer.concat([head, bytes]);
}
const fixarray = (n: number): Buffer => Buffer.from([0x90 | n]);
const fixmap = (n: number): Buffer => Buffer.from([0x80 | n]);

/** Frames a payload as the peer claims it: by default with its true length. */
export function frame(payload: Uint8Array, declared = payload.length): Buffer {
  const out = Buffer.allocUnsafe(4 + payload.length);
  out.writeUInt32BE(declared >>> 0, 0);
  out.set(payload, 4);
  return out;
}

function randomText(rng: Rng): string {
  if (rng.chance(0.2)) return rng.pick(PROTOTYPE_KEYS);
  return rng.bytes(rng.int(12)).toString('latin1');
}

/** A body as an application might send: nested, with every scalar kind (64-bit integers and floats included). */
function randomBody(rng: Rng, depth: number): unknown {
  switch (rng.int(depth > 4 ? 7 : 9)) {
    case 0:
      return null;
    case 1:
      return rng.chance(0.5);
    case 2:
      return rng.pick([0, 1, -1, 127, 128, -33, 65535, 2 ** 32, -(2 ** 31) - 1, 2 ** 53 - 1, -(2 ** 53), 2 ** 63, rng.u32()]);
    case 3:
      return rng.u32() / 7;
    case 4:
      return randomText(rng);
    case 5:
      return rng.bytes(rng.int(40));
    case 6:
      return rng.bytes(rng.int(3)).toString('hex').repeat(rng.int(50));
    case 7:
      return Array.from({ length: rng.int(6) }, () => randomBody(rng, depth + 1));
    default: {
      const object: Record<string, unknown> = {};
      for (let i = rng.int(6); i > 0; i--) setOwn(object, randomText(rng), randomBody(rng, depth + 1));
      return object;
    }
  }
}

/** `object[key] = value` would set the prototype for `__proto__`; a peer can send it as an own key. */
function setOwn(object: object, key: string, value: unknown): void {
  Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
}

const CODES = ['HANDLER_ERROR', 'CANCELLED', 'DEADLINE_EXCEEDED', 'SOMETHING_NEW', 'constructor', ''] as const;

/** A valid message of any of the eight types. */
export function randomMessage(rng: Rng): WireMessage {
  switch (rng.int(8)) {
    case 0: {
      const metadata: Record<string, string> = {};
      for (let i = rng.int(4); i > 0; i--) setOwn(metadata, randomText(rng), randomText(rng));
      return {
        type: 'request',
        method: randomText(rng) || 'm',
        timeoutMs: rng.chance(0.3) ? null : rng.u32(),
        priority: rng.pick(['critical', 'high', 'normal', 'low'] as const),
        metadata,
        body: randomBody(rng, 0),
        mode: rng.pick(['unary', 'stream', 'tunnel'] as const),
      };
    }
    case 1:
      return { type: 'response', body: randomBody(rng, 0) };
    case 2:
      return { type: 'item', body: randomBody(rng, 0) };
    case 3:
      return { type: 'end' };
    case 4:
      return { type: 'error', code: rng.pick(CODES) as 'HANDLER_ERROR', message: randomText(rng) };
    case 5:
      return { type: 'cancel', code: rng.pick(CODES) as 'CANCELLED', message: randomText(rng) };
    case 6:
      return { type: 'ping', nonce: rng.u32() };
    default:
      return { type: 'pong', nonce: rng.u32() };
  }
}

/** Encoded payloads (no header) of valid messages, one pool reused by the mutators. */
export function validPayloads(rng: Rng, count: number): Buffer[] {
  return Array.from({ length: count }, () => Buffer.from(encodeFrame(randomMessage(rng)).subarray(4)));
}

function mutate(rng: Rng, payload: Buffer): Buffer {
  let bytes = Buffer.from(payload);
  for (let edits = 1 + rng.int(4); edits > 0; edits--) {
    const at = bytes.length === 0 ? 0 : rng.int(bytes.length);
    switch (rng.int(6)) {
      case 0:
        if (bytes.length > 0) bytes[at] = bytes[at]! ^ (1 << rng.int(8));
        break;
      case 1:
        if (bytes.length > 0) bytes[at] = rng.pick(INTERESTING_BYTES);
        break;
      case 2:
        bytes = Buffer.concat([bytes.subarray(0, at), rng.bytes(1 + rng.int(8)), bytes.subarray(at)]);
        break;
      case 3:
        bytes = Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + 1 + rng.int(8))]);
        break;
      case 4:
        bytes = bytes.subarray(0, at);
        break;
      default: // a 32-bit length field after an interesting byte: 0xdd ffffffff and the like
        bytes = Buffer.concat([bytes.subarray(0, at), Buffer.from([rng.pick(INTERESTING_BYTES)]), rng.bytes(4), bytes.subarray(at)]);
    }
  }
  return bytes;
}

/** `depth` nested arrays or maps around nil, inside an item: the stack-overflow shape. */
export function deepPayload(depth: number, kind: 'array' | 'map'): Buffer {
  const level = kind === 'array' ? fixarray(1) : Buffer.concat([fixmap(1), str('k')]);
  return Buffer.concat([Buffer.from([0x92, 0x03]), Buffer.alloc(depth * level.length).fill(level), Buffer.from([0xc0])]);
}

/** An item whose body is an array of `count` empty maps: a container flood (about 60 bytes of heap per byte). */
export function containerFloodPayload(count: number): Buffer {
  const head = Buffer.from([0x92, 0x03, 0xdd, 0, 0, 0, 0]);
  head.writeUInt32BE(count, 3);
  return Buffer.concat([head, Buffer.alloc(count, 0x80)]);
}

/** A message whose type, metadata keys or body keys are Object.prototype's names. */
function prototypePayload(rng: Rng): Buffer {
  const key = rng.pick(PROTOTYPE_KEYS);
  switch (rng.int(3)) {
    case 0: // [key, ...]: the type itself
      return Buffer.concat([fixarray(2), str(key), str('x')]);
    case 1: // a request whose metadata holds the key
      return Buffer.concat([fixarray(7), Buffer.from([0x01]), str('m'), Buffer.from([0xc0, 0x02]), fixmap(1), str(key), str('v'), Buffer.from([0xc0, 0x00])]);
    default: // an item whose body is { key: { polluted: true } }
      return Buffer.concat([fixarray(2), Buffer.from([0x03]), fixmap(1), str(key), fixmap(1), str('polluted'), Buffer.from([0xc3])]);
  }
}

function hugeLengthPayload(rng: Rng): Buffer {
  const field = rng.pick([
    [0xdd, 0xff, 0xff, 0xff, 0xff],
    [0xdf, 0xff, 0xff, 0xff, 0xff],
    [0xc6, 0xff, 0xff, 0xff, 0xff],
    [0xdb, 0x7f, 0xff, 0xff, 0xff],
    [0xdc, 0xff, 0xff],
    [0xde, 0xff, 0xff],
    [0xda, 0xff, 0xff],
  ]);
  return Buffer.concat([Buffer.from([0x92, 0x03, ...field]), rng.bytes(rng.int(16))]);
}

function extensionPayload(rng: Rng): Buffer {
  const byte = rng.pick(EXTENSION_BYTES);
  const type = rng.chance(0.5) ? 0xff : rng.u32() & 0xff; // -1 is the timestamp extension
  const sizes: Record<number, number> = { 0xd4: 1, 0xd5: 2, 0xd6: 4, 0xd7: 8, 0xd8: 16 };
  const size = sizes[byte] ?? rng.int(20);
  const head = byte === 0xc7 ? [byte, size, type] : byte === 0xc8 ? [byte, 0, size, type] : byte === 0xc9 ? [byte, 0, 0, 0, size, type] : [byte, type];
  return Buffer.concat([Buffer.from([0x92, 0x03, ...head]), rng.bytes(size)]);
}

function int64Payload(rng: Rng): Buffer {
  return Buffer.concat([Buffer.from([0x92, rng.pick([0x03, 0x07, 0x08]), rng.pick([0xcf, 0xd3])]), rng.bytes(8)]);
}

/** Splits a byte stream the way a network might: whole, in a few random cuts, or (for small ones) byte by byte. */
function chunked(rng: Rng, bytes: Buffer): Uint8Array[] {
  if (bytes.length <= 64 && rng.chance(0.1)) return Array.from(bytes, (_, i) => bytes.subarray(i, i + 1));
  const cuts = [...new Set(Array.from({ length: rng.int(4) }, () => rng.int(bytes.length + 1)))].sort((a, b) => a - b);
  const chunks: Uint8Array[] = [];
  let last = 0;
  for (const cut of [...cuts, bytes.length]) {
    chunks.push(bytes.subarray(last, cut));
    last = cut;
  }
  return chunks;
}

export interface FuzzInput {
  kind: string;
  chunks: Uint8Array[];
  /** The receiver's max frame size: mostly the default, sometimes small so lengths hit FRAME_TOO_LARGE. */
  maxFrameSize?: number;
}

/** Builds inputs of every kind; the large hostile shapes are built once and replayed. */
export class InputSource {
  private readonly valid: Buffer[];
  private readonly deep: Buffer[];
  private readonly flood: Buffer;

  constructor(private readonly rng: Rng) {
    this.valid = validPayloads(rng, 512);
    this.deep = [deepPayload(33, 'array'), deepPayload(1000, 'map'), deepPayload(100_000, 'array'), deepPayload(100_000, 'map')];
    this.flood = containerFloodPayload(300_000);
  }

  next(): FuzzInput {
    const rng = this.rng;
    const roll = rng.int(100);
    let kind: string;
    let stream: Buffer;
    if (roll < 60) {
      kind = 'mutated';
      const payloads = Array.from({ length: 1 + rng.int(3) }, () => mutate(rng, rng.pick(this.valid)));
      // Usually the header tells the truth, so the mutated bytes reach the message decoder.
      stream = Buffer.concat(payloads.map((p) => frame(p, rng.chance(0.9) ? p.length : rng.u32())));
    } else if (roll < 68) {
      kind = 'valid';
      stream = frame(rng.pick(this.valid));
    } else if (roll < 78) {
      kind = 'random';
      stream = rng.chance(0.5) ? rng.bytes(rng.int(300)) : frame(rng.bytes(rng.int(300)));
    } else if (roll < 83) {
      kind = 'huge-length';
      stream = frame(hugeLengthPayload(rng));
    } else if (roll < 88) {
      kind = 'extension';
      stream = frame(extensionPayload(rng));
    } else if (roll < 93) {
      kind = 'prototype-key';
      stream = frame(prototypePayload(rng));
    } else if (roll < 97) {
      kind = 'int64';
      stream = frame(int64Payload(rng));
    } else if (roll < 99) {
      kind = 'deep';
      // Mostly the small deep shapes; the 100,000-deep ones (100-300 KB) one time in 20.
      stream = frame(rng.chance(0.05) ? rng.pick(this.deep.slice(2)) : rng.pick(this.deep.slice(0, 2)));
    } else if (rng.chance(0.1)) {
      kind = 'container-flood';
      stream = frame(this.flood);
    } else {
      kind = 'huge-frame-header';
      stream = Buffer.concat([frame(Buffer.alloc(0), 16 * 1024 * 1024 - rng.int(4)), rng.bytes(rng.int(64))]);
    }
    return { kind, chunks: chunked(rng, stream), maxFrameSize: rng.chance(0.05) ? 64 : undefined };
  }
}
