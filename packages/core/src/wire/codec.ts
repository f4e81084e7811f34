import { Packr, RESERVE_START_SPACE } from 'msgpackr';
import { AgentError } from '../errors.js';
import { decodeBinaryFrame, encodeBinaryFrame } from './binary-frames.js';
import { checkMsgpackShape, DEFAULT_DECODE_LIMITS, type DecodeLimits } from './msgpack-shape.js';
import { messageToTuple, tupleToMessage, type WireMessage } from './messages.js';
import type { BufferViews } from '../util/bytes.js';

/** Bytes of the big-endian length that precedes every frame's payload. */
export const FRAME_HEADER_BYTES = 4;
/** The largest frame a decoder accepts unless configured otherwise (16 MiB). */
export const DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024;

// Plain MessagePack (no records, no shared structures): every frame decodes on its own, in any implementation.
// Binary bodies (Uint8Array/Buffer) travel as msgpack `bin`, never base64.
// `undefined` (an absent body, a field left unset) goes out as nil: msgpackr's own encoding of it is an extension.
const packr = new Packr({ useRecords: false, moreTypes: false, int64AsType: 'number', mapsAsObjects: true, encodeUndefinedAsNil: true });

/**
 * Encodes one message as a frame: u32 payload length + msgpack payload. msgpackr leaves room for the header in
 * front of the payload it writes, so the frame is built in place: no second buffer, no copy. (Its output is a
 * view of a buffer msgpackr never writes over again: later frames go after it, or into a new buffer.)
 */
export function encodeFrame(message: WireMessage, maxFrameSize = DEFAULT_MAX_FRAME_SIZE): Buffer {
  let frame: Buffer | undefined;
  try {
    // A call with a binary body (most of a busy agent's frames) is written without msgpackr: binary-frames.ts.
    // A plain body there runs the caller's getters and Proxy traps as msgpackr does: what they throw is refused alike.
    frame = encodeBinaryFrame(message);
  } catch (error) {
    throw unencodable(message, error);
  }
  if (frame === undefined) {
    try {
      frame = packr.pack(messageToTuple(message), RESERVE_START_SPACE | FRAME_HEADER_BYTES);
    } catch (error) {
      throw unencodable(message, error);
    }
    // The one extension msgpackr writes with these options is a timestamp (a Date): refused before it leaves.
    if (mayHoldTimestamp(frame)) refuseExtensions(message, frame);
  }
  const payloadLength = frame.length - FRAME_HEADER_BYTES;
  if (payloadLength > maxFrameSize) {
    throw new AgentError('FRAME_TOO_LARGE', `${message.type} frame of ${payloadLength} bytes exceeds the ${maxFrameSize}-byte limit`);
  }
  frame.writeUInt32BE(payloadLength, 0);
  return frame;
}

function unencodable(message: WireMessage, error: unknown): AgentError {
  return new AgentError('INVALID_ARGUMENT', `cannot encode ${message.type}: ${(error as Error)?.message ?? String(error)}`, { cause: error });
}

/**
 * Whether the frame may hold a MessagePack timestamp: type -1 (0xff) right after a fixext 4/8 header (d6, d7;
 * d4 for msgpackr's invalid Date) or an ext 8 header of 12 bytes (c7 0c). memchr finds the 0xff bytes: text has
 * none (UTF-8 never uses 0xff), and one inside a number or bytes rarely follows such a header, so frames are
 * walked (refuseExtensions) almost only when they do hold a Date.
 */
function mayHoldTimestamp(frame: Buffer): boolean {
  for (let at = frame.indexOf(0xff, FRAME_HEADER_BYTES + 1); at !== -1; at = frame.indexOf(0xff, at + 1)) {
    const before = frame[at - 1];
    if (before === 0xd6 || before === 0xd7 || before === 0xd4 || (before === 12 && frame[at - 2] === 0xc7)) return true;
  }
  return false;
}

/** No bound but the shape's own: only an extension (or 0xc1) makes the walk throw. */
const SHAPE_ONLY: Readonly<DecodeLimits> = Object.freeze({ maxDepth: Number.MAX_SAFE_INTEGER, maxContainers: Number.MAX_SAFE_INTEGER });

/**
 * msgpackr writes a Date as MessagePack's timestamp extension, and every agentlink decoder refuses extension
 * types (checkMsgpackShape): sent, the peer would reset the call with PROTOCOL_ERROR and the caller learn
 * nothing of why. Refused here instead, where the sender can be told what to send.
 */
function refuseExtensions(message: WireMessage, frame: Buffer): void {
  try {
    checkMsgpackShape(frame.subarray(FRAME_HEADER_BYTES), SHAPE_ONLY);
  } catch {
    throw new AgentError(
      'INVALID_ARGUMENT',
      `cannot encode ${message.type}: it holds a Date, which agentlink does not carry (plain MessagePack, no extension types): send date.toISOString() or date.getTime()`,
    );
  }
}

/** Binary bodies from this size on are framed around, not copied into the frame (see `encodeFrameSegments`). */
const ZERO_COPY_BODY = 16 * 1024;

/**
 * Encodes one message as frame segments to write in order. Usually one buffer; for an item or response whose body
 * is a large Uint8Array, two: the frame header with msgpack's `bin 32` header (`92 0X c6 <u32 len>`), then the
 * caller's bytes themselves, so streaming binary data costs no copy and no allocation of its size. The bytes on
 * the wire are the same valid MessagePack either way.
 */
export function encodeFrameSegments(message: WireMessage, maxFrameSize = DEFAULT_MAX_FRAME_SIZE): Uint8Array[] {
  if ((message.type === 'item' || message.type === 'response') && message.body instanceof Uint8Array && message.body.length >= ZERO_COPY_BODY) {
    const body = message.body;
    const payloadLength = 7 + body.length;
    if (payloadLength > maxFrameSize) {
      throw new AgentError('FRAME_TOO_LARGE', `${message.type} frame of ${payloadLength} bytes exceeds the ${maxFrameSize}-byte limit`);
    }
    const head = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 7);
    head.writeUInt32BE(payloadLength, 0);
    head[4] = 0x92; // fixarray of 2
    head[5] = message.type === 'item' ? 3 : 2;
    head[6] = 0xc6; // bin 32
    head.writeUInt32BE(body.length, 7);
    return [head, body];
  }
  return [encodeFrame(message, maxFrameSize)];
}

/**
 * Decodes and validates one frame payload (without its length header). The bytes' shape is checked first
 * (`checkMsgpackShape`: depth, declared lengths, no extension types), so decoding costs time linear in the payload
 * and every failure is a PROTOCOL_ERROR. MessagePack 64-bit integers decode as numbers (never BigInt), and a
 * `__proto__` map key arrives as the own key `__proto_` (msgpackr renames it), never as a prototype. The tuple is
 * then checked by `tupleToMessage`, the hand-written equivalent of the zod schemas in message-schemas.ts.
 */
export function decodePayload(payload: Uint8Array, limits: Readonly<DecodeLimits> = DEFAULT_DECODE_LIMITS): WireMessage {
  return decodePayloadAt(payload, 0, payload.length, limits);
}

/**
 * `decodePayload` of the payload in `bytes` from `start` to `end`, read where it lies: a receiver takes the frames
 * of a chunk this way, and the frames of a token stream (binary or ASCII items) cost no view of their payload.
 */
export function decodePayloadAt(
  bytes: Uint8Array,
  start: number,
  end: number,
  limits: Readonly<DecodeLimits> = DEFAULT_DECODE_LIMITS,
  /** Views of `bytes` for binary bodies (FrameDecoder.frameViews), when the reader has them. */
  views?: BufferViews,
): WireMessage {
  const fast = decodeBinaryFrame(bytes, start, end, views, limits) ?? decodeStringItem(bytes, start, end);
  if (fast) return fast;
  const payload = start === 0 && end === bytes.length ? bytes : bytes.subarray(start, end);
  const message = tupleToMessage(unpackPayload(payload, limits));
  if (!message) throw new AgentError('PROTOCOL_ERROR', 'frame is not a valid agentlink message');
  return message;
}

/** The MessagePack value of one frame payload, shape-checked; not yet checked as a message. Throws PROTOCOL_ERROR. */
export function unpackPayload(payload: Uint8Array, limits: Readonly<DecodeLimits> = DEFAULT_DECODE_LIMITS): unknown {
  checkMsgpackShape(payload, limits);
  try {
    return packr.unpack(payload);
  } catch (error) {
    throw new AgentError('PROTOCOL_ERROR', `malformed msgpack frame: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * The frames of a token stream with a text body, decoded without msgpackr: an `item` whose body is an ASCII string
 * (fixstr, str 8) exactly filling the payload — `92 03 <a0|len> <bytes>` or `92 03 d9 <len> <bytes>`. The result is
 * the string msgpackr gives for the same bytes, and such bytes pass every shape check; anything else returns
 * undefined (binary bodies are `decodeBinaryFrame`'s).
 */
function decodeStringItem(bytes: Uint8Array, start: number, end: number): WireMessage | undefined {
  if (end - start < 3 || bytes[start] !== 0x92 || bytes[start + 1] !== 0x03 || !Buffer.isBuffer(bytes)) return undefined;
  const marker = bytes[start + 2]!;
  let from: number;
  let length: number;
  if (marker === 0xd9) {
    if (end - start < 4) return undefined;
    from = start + 4;
    length = bytes[start + 3]!;
  } else if (marker >= 0xa0 && marker <= 0xbf) {
    from = start + 3;
    length = marker - 0xa0;
  } else {
    return undefined;
  }
  if (from + length !== end) return undefined;
  for (let i = from; i < end; i++) if (bytes[i]! >= 0x80) return undefined;
  return { type: 'item', body: bytes.toString('latin1', from, end) };
}

/** Binary and string item bodies up to this many bytes are written by `encodeSmallItem` (bin 8, fixstr, str 8). */
const SMALL_BODY = 255;

/**
 * Writes the frame of an `item` with a short binary or ASCII string body into `target` at `offset` without msgpackr
 * (the bytes `decodeBinaryFrame` and `decodeStringItem` read: bin 8, fixstr or str 8, as msgpackr would write them); returns the offset
 * after it, or -1 when the body is of another kind or size, or does not fit before `target`'s end (then nothing
 * was written that counts).
 */
export function encodeSmallItem(body: unknown, target: Buffer, offset: number): number {
  if (body instanceof Uint8Array) {
    const length = body.length;
    if (length > SMALL_BODY || offset + 8 + length > target.length) return -1;
    target.writeUInt32BE(length + 4, offset);
    target[offset + 4] = 0x92;
    target[offset + 5] = 0x03;
    target[offset + 6] = 0xc4;
    target[offset + 7] = length;
    target.set(body, offset + 8);
    return offset + 8 + length;
  }
  if (typeof body !== 'string' || body.length > SMALL_BODY) return -1;
  const header = body.length < 32 ? 7 : 8; // fixstr or str 8
  if (offset + header + 3 * body.length > target.length) return -1;
  // ASCII only (as many bytes as UTF-16 units): other text, lone surrogates included, is msgpackr's to write.
  const written = target.write(body, offset + header, 'utf8');
  if (written !== body.length) return -1;
  target.writeUInt32BE(written + header - 4, offset);
  target[offset + 4] = 0x92;
  target[offset + 5] = 0x03;
  if (header === 7) {
    target[offset + 6] = 0xa0 | written;
  } else {
    target[offset + 6] = 0xd9;
    target[offset + 7] = written;
  }
  return offset + header + written;
}
