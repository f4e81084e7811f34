/**
 * The RFC 6455 header of one whole binary WebSocket message, written by hand into the room the codec and the mux
 * leave in front of a frame (core's `claimHeadroom`): the pipe then writes header and message to the TLS socket
 * as one buffer. Through `ws`'s sender each message was two writes (its header, then the data: a corked pair and a
 * `writev`), plus the header's own buffer and an options object per message.
 *
 * Only what agentlink sends: FIN set, opcode binary, no RSV bits (no extension is negotiated: perMessageDeflate
 * is off on both sides), and on a client's frames the MASK bit with a zero key (see `zeroMask`), so the payload
 * goes as it is.
 */

const FIN_BINARY = 0x82;
const MASK_BIT = 0x80;

/** Bytes of the header of a message of `length` bytes; `masked` on a client's frames (its 4-byte key). */
export function webSocketHeaderBytes(length: number, masked: boolean): number {
  const header = length <= 125 ? 2 : length <= 0xffff ? 4 : 10;
  return masked ? header + 4 : header;
}

/** Writes that header (`headerBytes` of it, from webSocketHeaderBytes) at the start of `frame`. */
export function writeWebSocketHeader(frame: Buffer, headerBytes: number, length: number, masked: boolean): void {
  frame[0] = FIN_BINARY;
  const mask = masked ? MASK_BIT : 0;
  if (length <= 125) {
    frame[1] = mask | length;
  } else if (length <= 0xffff) {
    frame[1] = mask | 126;
    frame[2] = length >>> 8;
    frame[3] = length & 0xff;
  } else {
    frame[1] = mask | 127;
    frame.writeUInt32BE(Math.floor(length / 0x1_0000_0000), 2);
    frame.writeUInt32BE(length >>> 0, 6);
  }
  if (masked) {
    // The zero key: four stores (see zeroMask).
    frame[headerBytes - 4] = 0;
    frame[headerBytes - 3] = 0;
    frame[headerBytes - 2] = 0;
    frame[headerBytes - 1] = 0;
  }
}
