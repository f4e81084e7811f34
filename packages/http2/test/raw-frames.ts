/** Hand-written HTTP/2 frames for tests that play a hostile peer (RFC 9113, section 4.1). */

/** One HTTP/2 frame on stream 0. */
export function frame(type: number, flags: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header[4] = flags;
  return Buffer.concat([header, payload]);
}

/** A client's connection preface. */
export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
export const SETTINGS = 0x4;
export const PING = 0x6;
