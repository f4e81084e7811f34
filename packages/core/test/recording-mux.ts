import { Identity } from '../src/index.js';
import { MuxedChannel, type ChannelStream } from '../src/transport.js';

/** A dialer-side mux whose pipe records every frame it sends; `buffered` is what the pipe reports as queued. */
export function recordingMux(buffered: () => number = () => 0): { channel: MuxedChannel; sent: Buffer[] } {
  const sent: Buffer[] = [];
  const channel = new MuxedChannel({
    kind: 'test',
    peer: Identity.generate().id,
    remoteAddress: 'memory',
    role: 'dialer',
    onStream: () => undefined,
    pipe: { send: (m) => void sent.push(Buffer.from(m)), get bufferedAmount() { return buffered(); }, close: () => undefined },
  });
  return { channel, sent };
}

/**
 * Two multiplexers joined by an in-memory pipe that records every frame. `oldListener` makes the listener look
 * like a peer from before frame flags to the dialer: its SETTINGS announce no features (id field 0), as such a
 * peer's do, and a flagged frame reaching it fails the test (such a peer closes the channel on it).
 */
export function muxPair(oldListener = false): { a: MuxedChannel; b: MuxedChannel; accepted: ChannelStream[]; fromA: Buffer[]; fromB: Buffer[] } {
  const accepted: ChannelStream[] = [];
  const fromA: Buffer[] = [];
  const fromB: Buffer[] = [];
  const make = (role: 'dialer' | 'listener', deliver: (m: Buffer) => void) =>
    new MuxedChannel({
      kind: 'test',
      peer: Identity.generate().id,
      remoteAddress: 'memory',
      role,
      onStream: (stream) => accepted.push(stream),
      pipe: { send: (m) => deliver(Buffer.from(m)), bufferedAmount: 0, close: () => undefined },
    });
  const a: MuxedChannel = make('dialer', (m) => {
    fromA.push(m);
    if (oldListener && m[0]! >= 0x40) throw new Error(`flagged frame ${m[0]} sent to a peer without frame flags`);
    setImmediate(() => b.receive(m));
  });
  const b: MuxedChannel = make('listener', (m) => {
    fromB.push(m);
    if (oldListener && m[0] === 6) m.writeUInt32BE(0, 1); // SETTINGS without features
    setImmediate(() => a.receive(m));
  });
  return { a, b, accepted, fromA, fromB };
}
