import { Identity } from '../src/index.js';
import { MuxedChannel } from '../src/transport.js';

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
