import { Duplex } from 'node:stream';
import { connect, TLSSocket, type TLSSocket as TLSSocketType } from 'node:tls';
import { AgentError, toAgentError, type AgentId } from '@agentlink/core';
import { ChunkQueue, authenticatePeer, secureContextOf, type ChannelStream, type TlsCredentials } from '@agentlink/core/transport';

const HANDSHAKE_TIMEOUT_MS = 10_000;

/** A ChannelStream as a node Duplex, so node:tls can run over it. */
function duplexOf(stream: ChannelStream): Duplex {
  let reading = false;
  const duplex: Duplex = new Duplex({
    write(chunk: Buffer, _encoding, callback) {
      stream.write(chunk).then(() => callback(), (error: unknown) => callback(toAgentError(error)));
    },
    final(callback) {
      stream.end().then(() => callback(), (error: unknown) => callback(toAgentError(error)));
    },
    read() {
      if (reading) return;
      reading = true;
      void (async () => {
        try {
          for (;;) {
            const chunk = await stream.read();
            if (chunk === undefined) {
              duplex.push(null);
              return;
            }
            if (!duplex.push(chunk)) break;
          }
        } catch (error) {
          duplex.destroy(toAgentError(error));
        } finally {
          reading = false;
        }
      })();
    },
    destroy(error, callback) {
      stream.reset(error ? toAgentError(error) : new AgentError('CANCELLED', 'tunnel closed'));
      callback(error);
    },
  });
  return duplex;
}

/** A TLS socket as a ChannelStream (writes resolve when the socket takes them below its high-water mark). */
class TlsChannelStream implements ChannelStream {
  /**
   * Writes the socket took over its high-water mark, waiting for 'drain' (or failing at 'close'): one listener of
   * each for all of them, where a pair per write made node warn of a listener leak past ten waiting writes.
   */
  private readonly drainWaiters: Array<{ resolve(): void; reject(error: AgentError): void }> = [];
  private readonly incoming = new ChunkQueue(() => {
    if (this.socket.isPaused() && this.incoming.queuedBytes < 256 * 1024) this.socket.resume();
  });

  constructor(private readonly socket: TLSSocketType) {
    socket.on('data', (chunk: Buffer) => {
      this.incoming.push(chunk);
      if (this.incoming.queuedBytes >= 1024 * 1024) socket.pause();
    });
    socket.on('end', () => this.incoming.end());
    socket.on('error', (error) => this.incoming.fail(toAgentError(error, 'UNAVAILABLE')));
    socket.on('close', () => {
      const closed = new AgentError('UNAVAILABLE', 'relayed tunnel closed');
      this.incoming.fail(closed);
      for (const waiter of this.drainWaiters.splice(0)) waiter.reject(closed);
    });
    socket.on('drain', () => {
      for (const waiter of this.drainWaiters.splice(0)) waiter.resolve();
    });
  }

  write(chunk: Uint8Array): Promise<void> {
    if (this.socket.destroyed) return Promise.reject(new AgentError('UNAVAILABLE', 'relayed tunnel closed'));
    if (this.socket.write(chunk)) return Promise.resolve();
    return new Promise((resolve, reject) => this.drainWaiters.push({ resolve, reject }));
  }

  end(): Promise<void> {
    this.socket.end();
    return Promise.resolve();
  }

  read(): Promise<Uint8Array | undefined> {
    return this.incoming.read();
  }

  reset(reason: AgentError): void {
    this.incoming.fail(reason);
    this.socket.destroy();
  }
}

/**
 * Runs TLS 1.3 end to end over a tunnel (the relay's byte pipe), with both agents' keys pinned as on every
 * channel: whoever carries the bytes sees ciphertext only. Resolves with the peer's proven AgentId and the
 * plaintext stream.
 */
export async function secureTunnel(
  tunnel: ChannelStream,
  options: { tls: TlsCredentials; role: 'client' | 'server'; expectedPeer: AgentId },
): Promise<{ peer: AgentId; stream: ChannelStream }> {
  const transport = duplexOf(tunnel);
  const common = { secureContext: secureContextOf(options.tls), rejectUnauthorized: false }; // TLS 1.3 only
  const socket =
    options.role === 'client'
      ? connect({ ...common, socket: transport, servername: undefined })
      : new TLSSocket(transport, { ...common, isServer: true, requestCert: true });
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new AgentError('UNAVAILABLE', 'TLS handshake through the relay timed out')), HANDSHAKE_TIMEOUT_MS);
      socket.once(options.role === 'client' ? 'secureConnect' : 'secure', () => {
        clearTimeout(timer);
        resolve();
      });
      socket.once('error', (error) => {
        clearTimeout(timer);
        reject(toAgentError(error, 'UNAUTHENTICATED'));
      });
      // The tunnel failing under the handshake (its far end reset) does not reach the TLS socket: without this
      // the handshake waited out its timer, and a hostile rendezvous's abandoned tunnels held their turns for it.
      transport.once('close', () => {
        clearTimeout(timer);
        reject(new AgentError('UNAVAILABLE', 'the relayed tunnel closed during the TLS handshake'));
      });
    });
    const peer = authenticatePeer(socket, options.expectedPeer);
    return { peer, stream: new TlsChannelStream(socket) };
  } catch (error) {
    socket.destroy();
    throw toAgentError(error, 'UNAUTHENTICATED');
  }
}
