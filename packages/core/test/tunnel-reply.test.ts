import { describe, expect, it } from 'vitest';
import { AgentError, createAgent, MAX_TUNNEL_ACCEPTANCE_BYTES } from '../src/index.js';
import { encodeFrame, type ChannelStream, type ListenContext } from '../src/transport.js';
import { readOneFrame } from '../src/agent/tunnel.js';
import { memoryTransport } from './memory-transport.js';

/** A stream whose reads return `chunks` in order, then the end. */
function streamOf(chunks: Uint8Array[]): ChannelStream {
  let next = 0;
  return {
    read: async () => chunks[next++],
    write: async () => undefined,
    end: async () => undefined,
    reset: () => undefined,
  };
}

/** `bytes` cut into chunks of `size` (the last may be shorter). */
function cut(bytes: Buffer, size: number): Buffer[] {
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) chunks.push(bytes.subarray(at, at + size));
  return chunks;
}

describe("a tunnel's accepting reply", () => {
  const reply = encodeFrame({ type: 'response', body: { accepted: 'x'.repeat(3000) } });
  const raw = Buffer.from('raw bytes of the tunnel');
  const wire = Buffer.concat([reply, raw]);

  it('is read exactly, however the peer cuts it, and the bytes behind it are handed on as they came', async () => {
    for (const size of [1, 3, 4, 5, 100, reply.length - 1, reply.length, reply.length + 1, wire.length]) {
      const chunks = cut(wire, size);
      const { payload, rest } = await readOneFrame(streamOf(chunks), 64 * 1024);
      expect(Buffer.from(payload)).toEqual(reply.subarray(4));
      // What followed the reply in its last chunk: the rest of that chunk, nothing more, nothing copied.
      const lastChunk = chunks[Math.ceil(reply.length / size) - 1]!;
      const chunkStart = (Math.ceil(reply.length / size) - 1) * size;
      expect(Buffer.from(rest)).toEqual(lastChunk.subarray(reply.length - chunkStart));
    }
  });

  it('a byte at a time, a large reply is held as few pieces and joined once (not re-copied per byte)', async () => {
    const large = encodeFrame({ type: 'response', body: Buffer.alloc(256 * 1024, 7) });
    const concat = Buffer.concat;
    let joins = 0;
    Buffer.concat = ((list: readonly Uint8Array[], total?: number) => {
      joins++;
      return concat(list, total);
    }) as typeof Buffer.concat;
    try {
      const { payload } = await readOneFrame(streamOf(cut(large, 1)), 1024 * 1024);
      expect(payload.length).toBe(large.length - 4);
    } finally {
      Buffer.concat = concat;
    }
    expect(joins).toBeLessThan(64); // the old reader joined everything so far once per chunk: 262,000 times
  });

  it('a header over the limit is refused before its body arrives; a stream that ends first is UNAVAILABLE', async () => {
    const header = Buffer.alloc(4);
    header.writeUInt32BE(64 * 1024 + 1);
    await expect(readOneFrame(streamOf([header]), 64 * 1024)).rejects.toMatchObject({ code: 'FRAME_TOO_LARGE' });
    await expect(readOneFrame(streamOf([reply.subarray(0, 10)]), 64 * 1024)).rejects.toBeInstanceOf(AgentError);
    await expect(readOneFrame(streamOf([reply.subarray(0, 10)]), 64 * 1024)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
  });
});

describe("openTunnel's bound on the accepting reply", () => {
  it('is 64 KiB by default: a larger acceptance fails the opening with FRAME_TOO_LARGE and the handler loses its stream', async () => {
    const network = new Map<string, ListenContext>();
    const server = await createAgent({ channels: [memoryTransport(network, 'tunnels')] });
    const client = await createAgent({ channels: [memoryTransport(network)], maxFrameSize: 16 * 1024 * 1024 });
    try {
      let opened: ChannelStream | undefined;
      server.handleTunnel('big', ({ size }: { size: number }) => ({ accept: Buffer.alloc(size, 1), onOpen: (stream) => void (opened = stream) }));
      const address = server.addresses[0]!;
      // Before: read up to the agent's maxFrameSize (16 MiB), charged to no inbound budget.
      await expect(client.openTunnel(address, 'big', { size: MAX_TUNNEL_ACCEPTANCE_BYTES })).rejects.toMatchObject({ code: 'FRAME_TOO_LARGE' });
      await expect.poll(() => opened).toBeDefined();
      await expect(opened!.read()).rejects.toBeInstanceOf(AgentError); // reset: the caller gave up at the header
      // Just under the bound (the frame's payload is the body and a few bytes of envelope), and a larger bound asked for.
      const fits = await client.openTunnel(address, 'big', { size: MAX_TUNNEL_ACCEPTANCE_BYTES - 64 });
      expect((fits.accepted as Uint8Array).length).toBe(MAX_TUNNEL_ACCEPTANCE_BYTES - 64);
      fits.stream.reset(new AgentError('CANCELLED', 'done'));
      const asked = await client.openTunnel(address, 'big', { size: 1024 * 1024 }, { maxAcceptBytes: 2 * 1024 * 1024 });
      expect((asked.accepted as Uint8Array).length).toBe(1024 * 1024);
      asked.stream.reset(new AgentError('CANCELLED', 'done'));
      await expect(client.openTunnel(address, 'big', { size: 1 }, { maxAcceptBytes: 0 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    } finally {
      await client.close();
      await server.close();
    }
  });
});
