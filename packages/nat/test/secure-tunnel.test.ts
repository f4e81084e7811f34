import { AgentError, Identity } from '@agentlink/core';
import { ChunkQueue, selfSignedCertificate, type ChannelStream } from '@agentlink/core/transport';
import { afterEach, describe, expect, it } from 'vitest';
import { secureTunnel } from '../src/index.js';

/** One end of an in-memory byte pipe, as the relay's tunnel is to secureTunnel. */
class PipeEnd implements ChannelStream {
  readonly incoming = new ChunkQueue();
  other!: PipeEnd;
  async write(chunk: Uint8Array): Promise<void> {
    this.other.incoming.push(Buffer.from(chunk));
  }
  async end(): Promise<void> {
    this.other.incoming.end();
  }
  read(): Promise<Uint8Array | undefined> {
    return this.incoming.read();
  }
  reset(reason: AgentError): void {
    this.incoming.fail(reason);
    this.other.incoming.fail(reason);
  }
}

async function tunnelPair() {
  const a = new PipeEnd();
  const b = new PipeEnd();
  a.other = b;
  b.other = a;
  const client = Identity.generate();
  const server = Identity.generate();
  const [caller, callee] = await Promise.all([
    secureTunnel(a, { tls: selfSignedCertificate(client), role: 'client', expectedPeer: server.id }),
    secureTunnel(b, { tls: selfSignedCertificate(server), role: 'server', expectedPeer: client.id }),
  ]);
  return { caller: caller.stream, callee: callee.stream };
}

const warnings: Error[] = [];
const onWarning = (warning: Error): void => void warnings.push(warning);
process.on('warning', onWarning);
afterEach(() => {
  warnings.length = 0;
});

describe('a TLS tunnel through the relay', () => {
  it('many writes waiting for drain share one listener: all complete in order, and node warns of no leak', async () => {
    const { caller, callee } = await tunnelPair();
    const chunk = (i: number) => Buffer.alloc(64 * 1024, i);
    // Nobody reads the callee: past its 1 MiB read buffer the socket pauses, so these writes wait for 'drain'.
    const writes = Array.from({ length: 16 }, (_, i) => caller.write(chunk(i)));
    const pieces: Uint8Array[] = [];
    let receivedBytes = 0;
    while (receivedBytes < 16 * 64 * 1024) {
      const piece = await callee.read();
      if (!piece) break;
      pieces.push(piece);
      receivedBytes += piece.length;
    }
    await Promise.all(writes);
    const sent = Buffer.concat(Array.from({ length: 16 }, (_, i) => chunk(i)));
    expect(Buffer.concat(pieces).equals(sent)).toBe(true); // toEqual on a MiB of bytes takes seconds
    await new Promise((resolve) => setImmediate(resolve)); // a warning is emitted on the next tick
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });

  it('writes waiting for drain fail UNAVAILABLE when the tunnel closes', async () => {
    const { caller } = await tunnelPair();
    const writes = Array.from({ length: 16 }, (_, i) =>
      caller.write(Buffer.alloc(64 * 1024, i)).then(
        () => 'written',
        (error: unknown) => (error instanceof AgentError ? error.code : 'other'),
      ),
    );
    caller.reset(new AgentError('CANCELLED', 'closed by the test'));
    const outcomes = await Promise.all(writes);
    expect(outcomes).toContain('UNAVAILABLE');
    expect(outcomes.every((o) => o === 'written' || o === 'UNAVAILABLE')).toBe(true);
  });
});
