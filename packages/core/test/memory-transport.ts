import { AgentError, type Transport } from '../src/index.js';
import { MuxedChannel, type Channel, type ListenContext, type MuxOptions } from '../src/transport.js';

/** What a pipe was asked to do with one frame: which side sent it, and the flush hints the mux gave with it. */
export interface SentFrame {
  from: 'dialer' | 'listener';
  frame: Buffer;
  flushBefore: boolean;
  flushAfter: boolean;
}

/**
 * An in-process transport for core's own tests: two MuxedChannels joined by an asynchronous in-memory pipe.
 * Real channels are tested by the conformance suite; this one lets core test the Agent without a socket.
 * `sent`, when given, records every frame either side's pipe was handed.
 */
export function memoryTransport(network: Map<string, ListenContext>, name?: string, mux?: MuxOptions, sent?: SentFrame[]): Transport & { dials: number } {
  const transport = {
    kind: 'memory',
    protocols: ['memory:'],
    dials: 0,
    async listen(context: ListenContext) {
      if (!name) return { addresses: [], close: async () => undefined };
      const url = `memory://${name}`;
      network.set(url, context);
      return { addresses: [url], close: async () => void network.delete(url) };
    },
    async dial(address: URL, context: Parameters<Transport['dial']>[1]): Promise<Channel> {
      transport.dials++;
      await new Promise((resolve) => setImmediate(resolve));
      const listener = network.get(address.href);
      if (!listener) throw new AgentError('UNAVAILABLE', `nothing listens at ${address.href}`);
      if (listener.identity.id !== context.expectedPeer) throw new AgentError('UNAUTHENTICATED', 'wrong key');
      const link = (role: 'dialer' | 'listener', peer: typeof context.expectedPeer, onStream: ListenContext['onStream'], other: () => MuxedChannel) =>
        new MuxedChannel({
          ...(role === 'dialer' ? mux : {}), // the dialler's mux options (its receive window)
          kind: 'memory',
          peer,
          remoteAddress: address.href,
          role,
          onStream,
          pipe: {
            send: (m, flushBefore, flushAfter) => {
              const copy = Buffer.from(m);
              sent?.push({ from: role, frame: copy, flushBefore: flushBefore === true, flushAfter: flushAfter === true });
              setImmediate(() => other().receive(copy));
            },
            bufferedAmount: 0,
            close: () => setImmediate(() => other().pipeClosed(new AgentError('UNAVAILABLE', 'memory pipe closed'))),
          },
        });
      const dialer: MuxedChannel = link('dialer', context.expectedPeer, context.onStream, () => accepted);
      const accepted: MuxedChannel = link('listener', context.identity.id, listener.onStream, () => dialer);
      listener.onChannel(accepted);
      return dialer;
    },
  };
  return transport;
}
