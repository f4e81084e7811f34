import { Packr } from 'msgpackr';
import { AgentError } from '../errors.js';
import { messageToTuple, tupleToMessage, type WireMessage } from './messages.js';

/** Bytes of the big-endian length that precedes every frame's payload. */
export const FRAME_HEADER_BYTES = 4;
export const DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024;

// Plain MessagePack (no records, no shared structures): every frame decodes on its own, in any implementation.
// Binary bodies (Uint8Array/Buffer) travel as msgpack `bin`, never base64.
const packr = new Packr({ useRecords: false, moreTypes: false, int64AsType: 'number', mapsAsObjects: true });

/** Encodes one message as a frame: u32 payload length + msgpack payload. */
export function encodeFrame(message: WireMessage, maxFrameSize = DEFAULT_MAX_FRAME_SIZE): Buffer {
  let payload: Buffer;
  try {
    payload = packr.pack(messageToTuple(message));
  } catch (error) {
    throw new AgentError('INVALID_ARGUMENT', `cannot encode ${message.type}: ${(error as Error).message}`, { cause: error });
  }
  if (payload.length > maxFrameSize) {
    throw new AgentError('FRAME_TOO_LARGE', `${message.type} frame of ${payload.length} bytes exceeds the ${maxFrameSize}-byte limit`);
  }
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  frame.writeUInt32BE(payload.length, 0);
  payload.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

/** Decodes and validates one frame payload (without its length header). */
export function decodePayload(payload: Uint8Array): WireMessage {
  let value: unknown;
  try {
    value = packr.unpack(payload);
  } catch (error) {
    throw new AgentError('PROTOCOL_ERROR', `malformed msgpack frame: ${(error as Error).message}`, { cause: error });
  }
  const message = tupleToMessage(value);
  if (!message) throw new AgentError('PROTOCOL_ERROR', 'frame is not a valid agentlink message');
  return message;
}
