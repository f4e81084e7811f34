import { describe, expect, it } from 'vitest';
import { Identity, type AgentError } from '../src/index.js';
import { muxOverStream, type ChannelStream, type MuxedChannel } from '../src/transport.js';

/** One direction of an in-memory byte stream: what one side writes, the other side reads, in order. */
class Lane {
  private readonly chunks: Uint8Array[] = [];
  private waiting?: (chunk: Uint8Array | undefined) => void;
  private ended = false;
  push(chunk: Uint8Array | undefined): void {
    if (chunk === undefined) this.ended = true;
    if (this.waiting) {
      const wake = this.waiting;
      this.waiting = undefined;
      wake(chunk);
    } else if (chunk) this.chunks.push(chunk);
  }
  read(): Promise<Uint8Array | undefined> {
    const chunk = this.chunks.shift();
    if (chunk || this.ended) return Promise.resolve(chunk);
    return new Promise((resolve) => (this.waiting = resolve));
  }
}

/** Two ends of one carrier stream, as a transport's long-lived stream would give them. */
function carrierPair(): [ChannelStream, ChannelStream] {
  const ab = new Lane();
  const ba = new Lane();
  const end = (out: Lane, inn: Lane): ChannelStream => ({
    write: async (chunk) => out.push(Buffer.from(chunk)),
    end: async () => out.push(undefined),
    read: () => inn.read(),
    reset: (_reason: AgentError) => out.push(undefined),
  });
  return [end(ab, ba), end(ba, ab)];
}

async function readAll(stream: ChannelStream): Promise<number> {
  let bytes = 0;
  for (let chunk = await stream.read(); chunk; chunk = await stream.read()) bytes += chunk.length;
  return bytes;
}

describe('muxOverStream', () => {
  it("takes the peer's full 64 KiB frames whatever this side's own maxChunk", async () => {
    const [dialerEnd, listenerEnd] = carrierPair();
    let accept!: (stream: ChannelStream) => void;
    const accepted = new Promise<ChannelStream>((resolve) => (accept = resolve));
    const make = (carrier: ChannelStream, role: 'dialer' | 'listener', maxChunk?: number): MuxedChannel =>
      muxOverStream(carrier, { kind: 'test', peer: Identity.generate().id, remoteAddress: 'memory', role, onStream: accept, maxChunk });
    // This side sends pieces of 100 bytes at most; the peer sends the protocol's largest, 64 KiB.
    const small = make(listenerEnd, 'listener', 100);
    const full = make(dialerEnd, 'dialer');
    const stream = await full.openStream();
    const body = Buffer.alloc(200 * 1024, 7);
    await stream.write(body);
    await stream.end();
    // Until 2026-11-24 the receiving side's frame limit was 5 + its own maxChunk: the first frame closed the channel.
    const received = accepted.then(readAll);
    const closedFirst = small.closed.then((reason) => `closed: ${reason.message}`);
    expect(await Promise.race([received, closedFirst])).toBe(body.length);
    await Promise.all([small.close(), full.close()]);
  });
});
