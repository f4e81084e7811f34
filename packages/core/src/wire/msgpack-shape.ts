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
  new ShapeWalk(bytes, limits).run();
}

/** One walk's state. A class, not closures: no per-call function objects on the hot path. */
class ShapeWalk {
  private position = 0;
  private readonly end: number;
  /** For each open container, the values its parent still expects after it. */
  private readonly parents: number[] = [];
  /** Values still expected at the current level: the frame is exactly one. */
  private expected = 1;
  private containers = 0;

  constructor(
    private readonly bytes: Uint8Array,
    private readonly limits: Readonly<DecodeLimits>,
  ) {
    this.end = bytes.length;
  }

  run(): void {
    const bytes = this.bytes;
    for (;;) {
      if (this.expected === 0) {
        if (this.parents.length === 0) break;
        this.expected = this.parents.pop()!;
        continue;
      }
      if (this.position >= this.end) throw malformed('truncated value', this.position);
      this.expected--;
      const byte = bytes[this.position++]!;
      if (byte <= 0x7f || byte >= 0xe0) continue; // positive / negative fixint
      if (byte <= 0x8f) {
        this.open((byte & 0x0f) * 2); // fixmap: key and value per entry
        continue;
      }
      if (byte <= 0x9f) {
        this.open(byte & 0x0f); // fixarray
        continue;
      }
      if (byte <= 0xbf) {
        this.skip(byte & 0x1f); // fixstr
        continue;
      }
      switch (byte) {
        case 0xc0: // nil
        case 0xc2: // false
        case 0xc3: // true
          continue;
        case 0xc4: // bin 8
        case 0xd9: // str 8
          this.skip(this.uint(1));
          continue;
        case 0xc5: // bin 16
        case 0xda: // str 16
          this.skip(this.uint(2));
          continue;
        case 0xc6: // bin 32
        case 0xdb: // str 32
          this.skip(this.uint(4));
          continue;
        case 0xcc: // uint 8
        case 0xd0: // int 8
          this.skip(1);
          continue;
        case 0xcd: // uint 16
        case 0xd1: // int 16
          this.skip(2);
          continue;
        case 0xca: // float 32
        case 0xce: // uint 32
        case 0xd2: // int 32
          this.skip(4);
          continue;
        case 0xcb: // float 64
        case 0xcf: // uint 64 (decoded as a number: int64AsType 'number')
        case 0xd3: // int 64
          this.skip(8);
          continue;
        case 0xdc: // array 16
          this.open(this.uint(2));
          continue;
        case 0xdd: // array 32
          this.open(this.uint(4));
          continue;
        case 0xde: // map 16
          this.open(this.uint(2) * 2);
          continue;
        case 0xdf: // map 32
          this.open(this.uint(4) * 2);
          continue;
        default:
          throw malformed(
            byte === 0xc1 ? 'the never-used byte 0xc1' : `extension type 0x${byte.toString(16)} (agentlink uses none)`,
            this.position - 1,
          );
      }
    }
    if (this.position !== this.end) throw malformed(`${this.end - this.position} trailing bytes after the message`, this.position);
  }

  private need(count: number): void {
    if (count > this.end - this.position) {
      throw malformed(`length ${count} runs past the end (${this.end - this.position} bytes left)`, this.position);
    }
  }

  private skip(count: number): void {
    this.need(count);
    this.position += count;
  }

  /** A big-endian unsigned length field of 1, 2 or 4 bytes. */
  private uint(size: 1 | 2 | 4): number {
    this.need(size);
    const bytes = this.bytes;
    let value = 0;
    for (let i = 0; i < size; i++) value = value * 256 + bytes[this.position + i]!;
    this.position += size;
    return value;
  }

  private open(values: number): void {
    if (++this.containers > this.limits.maxContainers) throw malformed(`more than ${this.limits.maxContainers} arrays and maps`, this.position);
    if (this.parents.length + 1 > this.limits.maxDepth) throw malformed(`nesting deeper than ${this.limits.maxDepth}`, this.position);
    this.need(values); // each value takes at least one byte
    if (values === 0) return;
    this.parents.push(this.expected);
    this.expected = values;
  }
}
