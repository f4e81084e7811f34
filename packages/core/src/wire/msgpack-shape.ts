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
 * - uses no extension type (fixext/ext, 0xd4-0xd8 and 0xc7-0xc9, timestamps included; only msgpackr's
 *   `undefined`, d4 00 00, which earlier agentlink versions sent for absent values) and not the unused 0xc1,
 * - is followed by no trailing bytes.
 * The decoder (msgpackr) recurses per level and has no depth limit of its own; this walk is iterative.
 */
export function checkMsgpackShape(bytes: Uint8Array, limits: Readonly<DecodeLimits> = DEFAULT_DECODE_LIMITS): void {
  const end = bytes.length;
  const { maxDepth, maxContainers } = limits;
  /** For each open container, the values its parent still expects after it. */
  const parents: number[] = [];
  /** Values still expected at the current level: the frame is exactly one. */
  let expected = 1;
  let containers = 0;
  let position = 0;
  // One flat loop with locals (no closures, no helper calls per byte): it stays fast after every kind of input.
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
    /** Bytes a str/bin/number takes after its type byte, or values a container holds (-1: none of those). */
    let skip = -1;
    let values = -1;
    if (byte <= 0x8f) values = (byte & 0x0f) * 2; // fixmap: key and value per entry
    else if (byte <= 0x9f) values = byte & 0x0f; // fixarray
    else if (byte <= 0xbf) skip = byte & 0x1f; // fixstr
    else {
      const size = LENGTH_FIELD[byte - 0xc0]!;
      if (size === UNSUPPORTED) {
        // msgpackr's `undefined` (fixext 1, type 0, data 0): what earlier agentlink versions sent for an absent
        // body or field. It decodes to undefined, in constant size: accepted, though agentlink now sends nil.
        if (byte === 0xd4 && bytes[position] === 0 && bytes[position + 1] === 0 && end - position >= 2) {
          position += 2;
          continue;
        }
        throw malformed(byte === 0xc1 ? 'the never-used byte 0xc1' : `extension type 0x${byte.toString(16)} (agentlink uses none)`, position - 1);
      }
      if (size === FIXED) {
        skip = FIXED_SIZE[byte - 0xc0]!;
      } else {
        if (size > end - position) throw malformed('truncated length', position);
        let length = 0;
        for (let i = 0; i < size; i++) length = length * 256 + bytes[position + i]!;
        position += size;
        if (byte >= 0xdc) values = byte >= 0xde ? length * 2 : length; // array 16/32, map 16/32
        else skip = length; // bin 8/16/32, str 8/16/32
      }
    }
    if (skip >= 0) {
      if (skip > end - position) throw malformed(`length ${skip} runs past the end (${end - position} bytes left)`, position);
      position += skip;
      continue;
    }
    if (++containers > maxContainers) throw malformed(`more than ${maxContainers} arrays and maps`, position);
    if (parents.length + 1 > maxDepth) throw malformed(`nesting deeper than ${maxDepth}`, position);
    // Each value takes at least one byte.
    if (values > end - position) throw malformed(`length ${values} runs past the end (${end - position} bytes left)`, position);
    if (values > 0) {
      parents.push(expected);
      expected = values;
    }
  }
  if (position !== end) throw malformed(`${end - position} trailing bytes after the message`, position);
}

const UNSUPPORTED = -1;
/** A type whose payload has a fixed size (FIXED_SIZE), with no length field. */
const FIXED = 0;

/**
 * For type bytes 0xc0-0xdf: the size of the length field that follows (1, 2 or 4), FIXED, or UNSUPPORTED
 * (0xc1 is never used; 0xc7-0xc9 and 0xd4-0xd8 are extension types, which agentlink does not use).
 */
const LENGTH_FIELD: readonly number[] = [
  FIXED, UNSUPPORTED, FIXED, FIXED, // c0 nil, c1, c2 false, c3 true
  1, 2, 4, // c4-c6 bin 8/16/32
  UNSUPPORTED, UNSUPPORTED, UNSUPPORTED, // c7-c9 ext 8/16/32
  FIXED, FIXED, // ca float 32, cb float 64
  FIXED, FIXED, FIXED, FIXED, // cc-cf uint 8/16/32/64 (64-bit decodes as a number: int64AsType 'number')
  FIXED, FIXED, FIXED, FIXED, // d0-d3 int 8/16/32/64
  UNSUPPORTED, UNSUPPORTED, UNSUPPORTED, UNSUPPORTED, UNSUPPORTED, // d4-d8 fixext 1/2/4/8/16
  1, 2, 4, // d9-db str 8/16/32
  2, 4, // dc-dd array 16/32
  2, 4, // de-df map 16/32
];

/** For FIXED type bytes 0xc0-0xdf: the bytes that follow. */
const FIXED_SIZE: readonly number[] = [
  0, 0, 0, 0, // c0-c3
  0, 0, 0, 0, 0, 0, // c4-c9 (not fixed)
  4, 8, // ca, cb
  1, 2, 4, 8, // cc-cf
  1, 2, 4, 8, // d0-d3
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // d4-df (not fixed)
];
