/** Big-endian u32 from any Uint8Array (Buffer's readUInt32BE needs a Buffer). */
export function readU32(bytes: Uint8Array, offset: number): number {
  return ((bytes[offset]! << 24) >>> 0) + (bytes[offset + 1]! << 16) + (bytes[offset + 2]! << 8) + bytes[offset + 3]!;
}
