import type { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';

/**
 * Reads a WebSocket connection's frames in the TLS socket's 'data' callback, taking the frames agentlink's peers
 * send on every call itself and handing every other byte to `ws`'s own Receiver, which keeps every verdict.
 *
 * Why: `ws`'s Receiver is a Writable stream. Each TLS read went `socket 'data'` → `Writable.write` → its `_write`
 * → a parsing loop that slices the read into new Buffer views three times (header, mask, payload), copies the
 * payload list into the message (`concat`), emits 'message' on the Receiver, then again on the WebSocket, and
 * ends with node's `afterWrite` tick. That is ~0.45–0.6 µs and 0.7–0.9 KB of objects per message in a loop, and
 * 5–8% of an agentlink ws call's CPU as an A/B of builds (docs/performance-log.md, "Reading ws frames in the data
 * callback"). This reader hands a view of the payload to the mux straight from the read.
 *
 * What it takes (the fast path): a whole frame inside one read that is FIN + binary with no RSV bits, outside a
 * fragmented message, of at most `maxPayload` bytes, masked on a server (with the zero key agentlink's clients use)
 * and unmasked on a client. Everything else goes to `ws`'s Receiver byte for byte and in order: control frames
 * (pings, which `ws` answers within its pending-pong bound; pongs; close, with its handshake and codes), fragmented
 * and text messages, frames with a non-zero mask key, frames split across reads, and every frame to refuse (RSV
 * bits, bad opcodes, a wrong MASK bit, oversize: 1002, 1008, 1009 as today). The reader only follows the frame
 * boundaries of what it hands on (keeping a copy of a header cut by the end of a read, at most 13 bytes) so that it
 * can take frames again after.
 * That keeps every bound of docs/security.md where it was: what `ws` holds is only what it was handed, and a
 * frame the reader takes is never held at all.
 */

/** The part of `ws`'s Receiver (a Writable stream) the reader hands frames to. */
export interface FrameReceiver extends EventEmitter {
  write(chunk: Buffer): boolean;
  /** Set as soon as a write was refused (Writable's; its 'error' event follows a tick later). */
  readonly errored: Error | null;
}

export interface FrameReaderOptions {
  /** A server takes masked frames only, a client unmasked ones only (RFC 6455 5.1); the others go to `ws`. */
  isServer: boolean;
  /** `ws`'s maxPayload on this socket: a larger frame goes to `ws`, which refuses it (1009). */
  maxPayload: number;
  /** `ws`'s Receiver of this socket. */
  receiver: FrameReceiver;
  /** One whole binary message read here: a view into the read, as the messages `ws` hands on are views into theirs. */
  onMessage(data: Buffer): void;
  /** Pauses the socket: `ws`'s Receiver asked for it (its write returned false), as ws's own data listener does. */
  pause(): void;
}

const FIN_BINARY = 0x82;
const MASK_BIT = 0x80;
const OPCODE_CONTINUATION = 0;
/** The longest header: 2 bytes, a 64-bit length, a mask key. */
const LONGEST_HEADER = 14;

export class FrameReader {
  /** Frames read here, not by `ws` (for tests and benchmarks: shows the reader is in the path). */
  framesRead = 0;
  /** Payload bytes of the frame being handed to `ws` that are still to come. */
  private owedToReceiver = 0;
  /** A fragmented message is open at `ws` (its frames, and the continuations after, all go there). */
  private fragmentOpen = false;
  /** A copy of the start of a header cut by the end of a read, to learn the frame's length once it is whole. */
  private header: Buffer | undefined = undefined;
  private headerHave = 0;
  private stopped = false;
  private readonly maskBit: number;

  constructor(private readonly options: FrameReaderOptions) {
    this.maskBit = options.isServer ? MASK_BIT : 0;
  }

  /** No more reading: `ws` concluded (a close frame) or refused a frame; what follows is not read, as in `ws`. */
  stop(): void {
    this.stopped = true;
  }

  /** One read from the socket. */
  push(chunk: Buffer): void {
    const end = chunk.length;
    let offset = 0;
    if (this.stopped) return;
    if (this.headerHave > 0) {
      offset = this.finishHeader(chunk);
      if (offset < 0 || this.stopped) return;
    }
    while (offset < end) {
      if (this.owedToReceiver > 0) {
        const take = Math.min(this.owedToReceiver, end - offset);
        this.owedToReceiver -= take;
        this.toReceiver(chunk.subarray(offset, offset + take));
        if (this.stopped) return;
        offset += take;
        continue;
      }
      const left = end - offset;
      const headerBytes = left < 2 ? LONGEST_HEADER : headerLength(chunk[offset + 1]!);
      if (left < headerBytes) {
        // A header cut by the end of the read: the frame is ws's. Its bytes go to ws as they come (so that ws's state
        // always matches every byte read so far: ws also writes a paused socket's last bytes to its Receiver itself
        // when the socket closes); the reader keeps a copy (at most 13 bytes) to learn where the frame ends.
        this.header ??= Buffer.alloc(LONGEST_HEADER);
        chunk.copy(this.header, 0, offset, end);
        this.headerHave = left;
        this.toReceiver(chunk.subarray(offset, end));
        return;
      }
      const b0 = chunk[offset]!;
      const b1 = chunk[offset + 1]!;
      const length = payloadLength(chunk, offset, b1);
      const payloadAt = offset + headerBytes;
      if (
        b0 === FIN_BINARY &&
        !this.fragmentOpen &&
        (b1 & MASK_BIT) === this.maskBit &&
        length <= this.options.maxPayload &&
        end - payloadAt >= length &&
        (this.maskBit === 0 || (chunk[payloadAt - 4]! | chunk[payloadAt - 3]! | chunk[payloadAt - 2]! | chunk[payloadAt - 1]!) === 0)
      ) {
        this.framesRead++;
        offset = payloadAt + length;
        this.options.onMessage(chunk.subarray(payloadAt, offset));
        if (this.stopped) return;
        continue;
      }
      // Anything else is ws's to read and judge: the header now, the payload as it comes.
      this.handOn(b0, length);
      this.toReceiver(chunk.subarray(offset, payloadAt));
      if (this.stopped) return;
      offset = payloadAt;
    }
  }

  /**
   * Completes the copy of a header cut by the last read with the start of this one, and hands those bytes on to
   * `ws` too (the frame is ws's: it was never whole in one read). Returns where this read's next bytes start, or -1
   * if the header is still not whole.
   */
  private finishHeader(chunk: Buffer): number {
    const header = this.header!;
    let used = 0;
    if (this.headerHave < 2) {
      used = Math.min(2 - this.headerHave, chunk.length);
      chunk.copy(header, this.headerHave, 0, used);
      this.headerHave += used;
    }
    if (this.headerHave >= 2) {
      const more = Math.min(headerLength(header[1]!) - this.headerHave, chunk.length - used);
      chunk.copy(header, this.headerHave, used, used + more);
      this.headerHave += more;
      used += more;
    }
    if (used > 0) this.toReceiver(chunk.subarray(0, used));
    if (this.headerHave < 2 || this.headerHave < headerLength(header[1]!)) return -1;
    this.headerHave = 0;
    this.handOn(header[0]!, payloadLength(header, 0, header[1]!));
    return used;
  }

  /** Follows a frame handed to `ws`: its payload goes there too, and whether a fragmented message opens or ends. */
  private handOn(b0: number, length: number): void {
    this.owedToReceiver = length;
    const opcode = b0 & 0x0f;
    const fin = (b0 & 0x80) !== 0;
    // ws refuses a frame that breaks these rules (and then the reader stops), so only valid ones move the state.
    if (opcode === OPCODE_CONTINUATION) {
      if (fin) this.fragmentOpen = false;
    } else if (opcode < 8 && !fin) {
      this.fragmentOpen = true;
    }
  }

  private toReceiver(bytes: Buffer): void {
    const receiver = this.options.receiver;
    const more = receiver.write(bytes);
    // A refused frame: ws reads nothing after it (its 'error', a tick later, closes the connection), nor does the
    // reader, from this read on.
    if (receiver.errored !== null) this.stopped = true;
    else if (!more) this.options.pause();
  }
}

/** Header bytes of a frame, from its second byte. */
function headerLength(b1: number): number {
  const length7 = b1 & 0x7f;
  const header = length7 === 126 ? 4 : length7 === 127 ? 10 : 2;
  return (b1 & MASK_BIT) !== 0 ? header + 4 : header;
}

/**
 * The payload length of the header at `offset` (whole). A 64-bit length past 2^53 − 1 reads as Infinity: never taken
 * here, and `ws` refuses it (1009).
 */
function payloadLength(bytes: Buffer, offset: number, b1: number): number {
  const length7 = b1 & 0x7f;
  if (length7 < 126) return length7;
  if (length7 === 126) return (bytes[offset + 2]! << 8) | bytes[offset + 3]!;
  const high = bytes.readUInt32BE(offset + 2);
  return high > 0x1f_ffff ? Infinity : high * 0x1_0000_0000 + bytes.readUInt32BE(offset + 6);
}

/**
 * Puts a FrameReader in front of `ws`'s Receiver on an open WebSocket: `ws`'s own 'data' listener on the socket
 * (`socketOnData`, which writes every read to the Receiver) is replaced by the reader's. Reaches into internals
 * of `ws` 8 (the WebSocket's `_receiver` and `_socket`, the listener's name, the Receiver's `_allowSynchronousEvents`), pinned by
 * frame-reader.test.ts on real sockets; if any is not as expected, `ws` reads everything as before and this returns
 * undefined (frame-reader-fallback.test.ts).
 *
 * `ws` must emit its events synchronously (`allowSynchronousEvents`, the default since ws 8.17 and set explicitly
 * by this channel), or a message `ws` read would be overtaken by one read here; and its Receiver must be a Writable
 * that says at once when it refused a write (`errored`, null until then), or the reader would stop at the first
 * byte it hands on (and nothing would read the socket after it).
 */
export function readFramesFirst(
  socket: WebSocket,
  raw: Duplex,
  init: { isServer: boolean; maxPayload: number; onMessage(data: Buffer): void },
): FrameReader | undefined {
  const internals = socket as unknown as { _receiver?: FrameReceiver & { _allowSynchronousEvents?: unknown }; _socket?: unknown };
  const receiver = internals._receiver;
  // ws's listener, and only one of that name (node's HTTP client has a `socketOnData` of its own, gone by the upgrade):
  // removing another would leave ws's in place, and every read would be read twice.
  const named = raw.listeners('data').filter((listener) => listener.name === 'socketOnData');
  const wsOnData = named.length === 1 ? (named[0] as (chunk: Buffer) => void) : undefined;
  if (
    internals._socket !== raw ||
    receiver === undefined ||
    typeof receiver.write !== 'function' ||
    receiver.errored !== null ||
    receiver._allowSynchronousEvents !== true ||
    wsOnData === undefined
  ) {
    return undefined;
  }
  const reader = new FrameReader({ ...init, receiver, pause: () => raw.pause() });
  const onData = (chunk: Buffer): void => reader.push(chunk);
  // Where ws removes its own listener (a close frame read, or a frame refused), the reader stops and goes.
  const stop = (): void => {
    reader.stop();
    raw.removeListener('data', onData);
  };
  receiver.on('conclude', stop);
  receiver.on('error', stop);
  raw.removeListener('data', wsOnData);
  raw.on('data', onData);
  return reader;
}
