import { AgentError } from '../errors.js';

/** Containers (arrays, maps) one frame may nest, counting the message's own array as 1: a body may nest 31. */
export const MAX_NESTING_DEPTH = 32;
/**
 * Containers one frame may hold in all. Each decodes to a JS object or array of about 40-70 bytes of heap from
 * one byte of MessagePack; this bounds that amplification to about 16 MiB per frame.
 */
export const MAX_CONTAINERS_PER_FRAME = 262_144;

/** What a frame's MessagePack may contain, checked before it is decoded (see `checkMsgpackShape`). */
export interface DecodeLimits {
  maxDepth: number;
  maxContainers: number;
}

export const DEFAULT_DECODE_LIMITS: Readonly<DecodeLimits> = Object.freeze({
  maxDepth: MAX_NESTING_DEPTH,
  maxContainers: MAX_CONTAINERS_PER_FRAME,
});

function malformed(reason: string, position: number): AgentError {
  return new AgentError('PROTOCOL_ERROR', `malformed msgpack frame: ${reason} at byte ${position}`);
}

/**
 * Walks the MessagePack bytes of one frame without building anything, in time linear in their length, and throws
 * PROTOCOL_ERROR unless they are exactly one value that:
 * - nests at most `maxDepth` containers and holds at most `maxContainers`,
 * - declares no array, map, string or bin longer than the bytes left (every element takes at least one byte),
 *   so the decoder never allocates for lengths the frame cannot hold,
 * - uses no extension type (fixext/ext, 0xd4-0xd8 and 0xc7-0xc9, timestamps included) and not the unused 0xc1,
 * - is followed by no trailing bytes.
 * The decoder (msgpackr) recurses per level and has no depth limit of its own; this walk is iterative.
 */
export function checkMsgpackShape(bytes: Uint8Array, limits: Readonly<DecodeLimits> = DEFAULT_DECODE_LIMITS): void {
  const end = bytes.length;
  /** For each open container, the values its parent still expects after it. */
  const parents: number[] = [];
  /** Values still expected at the current level: the frame is exactly one. */
  let expected = 1;
  let containers = 0;
  let position = 0;

  const need = (count: number): void => {
    if (count > end - position) throw malformed(`length ${count} runs past the end (${end - position} bytes left)`, position);
  };
  const skip = (count: number): void => {
    need(count);
    position += count;
  };
  const u8 = (): number => {
    need(1);
    return bytes[position++]!;
  };
  const u16 = (): number => {
    need(2);
    const value = (bytes[position]! << 8) | bytes[position + 1]!;
    position += 2;
    return value;
  };
  const u32 = (): number => {
    need(4);
    const value = bytes[position]! * 0x1000000 + ((bytes[position + 1]! << 16) | (bytes[position + 2]! << 8) | bytes[position + 3]!);
    position += 4;
    return value;
  };
  const open = (values: number): void => {
    if (++containers > limits.maxContainers) throw malformed(`more than ${limits.maxContainers} arrays and maps`, position);
    if (parents.length + 1 > limits.maxDepth) throw malformed(`nesting deeper than ${limits.maxDepth}`, position);
    need(values); // each value takes at least one byte
    if (values === 0) return;
    parents.push(expected);
    expected = values;
  };

  for (;;) {
    if (expected === 0) {
      if (parents.length === 0) break;
      expected = parents.pop()!;
      continue;
    }
    if (position >= end) throw malformed('truncated value', position);
    expected--;
    const byte = bytes[position++]!;
    if (byte <= 0x7f || byte >= 0xe0) continue; // positive / negative fixint
    if (byte <= 0x8f) {
      open((byte & 0x0f) * 2); // fixmap: key and value per entry
      continue;
    }
    if (byte <= 0x9f) {
      open(byte & 0x0f); // fixarray
      continue;
    }
    if (byte <= 0xbf) {
      skip(byte & 0x1f); // fixstr
      continue;
    }
    switch (byte) {
      case 0xc0: // nil
      case 0xc2: // false
      case 0xc3: // true
        continue;
      case 0xc4: // bin 8
      case 0xd9: // str 8
        skip(u8());
        continue;
      case 0xc5: // bin 16
      case 0xda: // str 16
        skip(u16());
        continue;
      case 0xc6: // bin 32
      case 0xdb: // str 32
        skip(u32());
        continue;
      case 0xcc: // uint 8
      case 0xd0: // int 8
        skip(1);
        continue;
      case 0xcd: // uint 16
      case 0xd1: // int 16
        skip(2);
        continue;
      case 0xca: // float 32
      case 0xce: // uint 32
      case 0xd2: // int 32
        skip(4);
        continue;
      case 0xcb: // float 64
      case 0xcf: // uint 64 (decoded as a number: int64AsType 'number')
      case 0xd3: // int 64
        skip(8);
        continue;
      case 0xdc: // array 16
        open(u16());
        continue;
      case 0xdd: // array 32
        open(u32());
        continue;
      case 0xde: // map 16
        open(u16() * 2);
        continue;
      case 0xdf: // map 32
        open(u32() * 2);
        continue;
      default:
        throw malformed(
          byte === 0xc1 ? 'the never-used byte 0xc1' : `extension type 0x${byte.toString(16)} (agentlink uses none)`,
          position - 1,
        );
    }
  }
  if (position !== end) throw malformed(`${end - position} trailing bytes after the message`, position);
}
