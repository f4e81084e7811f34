/** Big-endian u32 from any Uint8Array (Buffer's readUInt32BE needs a Buffer). */
export function readU32(bytes: Uint8Array, offset: number): number {
  return ((bytes[offset]! << 24) >>> 0) + (bytes[offset + 1]! << 16) + (bytes[offset + 2]! << 8) + bytes[offset + 3]!;
}

/**
 * The class of every Buffer (node's FastBuffer: what `Buffer#subarray` and msgpackr build), reached through
 * `Buffer[Symbol.species]`; undefined on a runtime without that getter (then views are made with `subarray`).
 */
const FastBuffer = fastBufferClass();

function fastBufferClass(): (new (buffer: ArrayBufferLike, byteOffset: number, length: number) => Buffer) | undefined {
  const species = (Buffer as unknown as Record<symbol, unknown>)[Symbol.species];
  if (typeof species !== 'function' || species.prototype !== Buffer.prototype) return undefined;
  return species as new (buffer: ArrayBufferLike, byteOffset: number, length: number) => Buffer;
}

/**
 * Views of one Buffer, made without `subarray`: the same Buffers `bytes.subarray(start, end)` returns, but the
 * Buffer's `buffer` and `byteOffset` (getters, ~60 ns together on Node 20) are read once, not per view, and there is
 * no species lookup. A chunk of ~680 tokens gives each token's body a view: with `subarray` that was a fifth of
 * the caller's read path (docs/performance-log.md, "HTTP/2 token bursts: the last fraction of a µs per token").
 */
export class BufferViews {
  private readonly buffer: ArrayBufferLike;
  private readonly base: number;

  private constructor(bytes: Buffer, private readonly make: new (buffer: ArrayBufferLike, byteOffset: number, length: number) => Buffer) {
    this.buffer = bytes.buffer;
    this.base = bytes.byteOffset;
  }

  /** Views of `bytes` if it is a Buffer (any other Uint8Array keeps `subarray`, which gives its own class). */
  static of(bytes: Uint8Array): BufferViews | undefined {
    return FastBuffer && Object.getPrototypeOf(bytes) === Buffer.prototype ? new BufferViews(bytes as Buffer, FastBuffer) : undefined;
  }

  /** `bytes.subarray(start, end)` for `0 <= start <= end <= bytes.length` (the caller checked the bounds). */
  view(start: number, end: number): Buffer {
    return new this.make(this.buffer, this.base + start, end - start);
  }
}
