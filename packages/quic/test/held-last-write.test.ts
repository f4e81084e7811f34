import { AgentError, createAgent, Identity } from '@agentlink/core';
import { encodeFrame, errorCodeToNumber, selfSignedCertificate, WRITTEN, type Channel, type ChannelStream, type ListenContext } from '@agentlink/core/transport';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { quic } from '../src/index.js';
import type { NativeStream } from '../src/native.js';
import type { QuicChannel } from '../src/quic-channel.js';

/**
 * A stream's last write up to 16 KiB is handed to the engine's thread whole (`tryWriteFinish`, so the write and
 * its end leave in one packet). When the peer's credit is short, the bytes wait there after JavaScript counted
 * them written and released the stream (as ws and HTTP/2 count a write the kernel or session took). The engine
 * counts such writes per connection: the channel is not idle while one waits (its `activeStreams` asks the engine
 * when no stream is open in JavaScript), and one that fails is counted in the connection's stats while the peer's
 * read fails instead. Before, the pool's idle close cut a reply still waiting for credit.
 */

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

function transportContext(identity = Identity.generate()): Omit<ListenContext, 'onChannel'> {
  return { identity, tls: selfSignedCertificate(identity), onStream: () => undefined };
}

/** The dialler's streams get at most `window` bytes of credit; the listener hands us the streams it accepts. */
async function pair(window: number): Promise<{ client: QuicChannel; server: QuicChannel; accepted(): Promise<ChannelStream> }> {
  const serverIdentity = Identity.generate();
  const streams: ChannelStream[] = [];
  const waiting: Array<(stream: ChannelStream) => void> = [];
  let server!: (channel: Channel) => void;
  const serverChannel = new Promise<Channel>((resolve) => (server = resolve));
  const listening = quic({ port: 0 });
  const listener = await listening.listen({
    ...transportContext(serverIdentity),
    onStream: (stream) => {
      const next = waiting.shift();
      if (next) next(stream);
      else streams.push(stream);
    },
    onChannel: (channel) => server(channel),
  });
  const dialling = quic({ streamWindow: window });
  const client = await dialling.dial(new URL(listener.addresses[0]!), {
    ...transportContext(),
    expectedPeer: serverIdentity.id,
    signal: AbortSignal.timeout(10_000),
  });
  cleanups.push(async () => {
    await client.close();
    await listener.close();
    await dialling.close!();
    await listening.close!();
  });
  const accepted = (): Promise<ChannelStream> => {
    const ready = streams.shift();
    return ready ? Promise.resolve(ready) : new Promise((resolve) => waiting.push(resolve));
  };
  return { client: client as QuicChannel, server: (await serverChannel) as QuicChannel, accepted };
}

/** Opens a stream and has the listener's side of it (the request's bytes read, our end reached). */
async function servedStream(client: Channel, accepted: () => Promise<ChannelStream>): Promise<{ ours: ChannelStream; theirs: ChannelStream }> {
  const ours = await client.openStream();
  await ours.write(Buffer.from('request'));
  await ours.end();
  const theirs = await accepted();
  expect((await readAll(theirs)).toString()).toBe('request');
  return { ours, theirs };
}

/** Reads `stream` to its end: the bytes. */
async function readAll(stream: ChannelStream): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for (let chunk = await stream.read(); chunk; chunk = await stream.read()) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** Turns of the event loop until `done` (the engine's thread settles a held write on its own time). */
async function turnsUntil(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setImmediate(resolve));
}

describe('QUIC: a last write the engine holds for credit', () => {
  it('counts on its connection until it went: the channel is not idle meanwhile', async () => {
    const { client, server, accepted } = await pair(1024);
    const { ours, theirs } = await servedStream(client, accepted);
    const reply = Buffer.alloc(8 * 1024, 7); // past the peer's 1 KiB window, within the 16 KiB last-write path
    expect(theirs.endWith!(reply)).toBe(WRITTEN); // taken whole, as a kernel takes a ws write
    // A round trip on another stream: the held write has had every chance to go, and cannot (no credit).
    const other = await servedStream(client, accepted);
    await other.theirs.endWith!(Buffer.from('ok'));
    expect((await readAll(other.ours)).toString()).toBe('ok');
    expect(server.stats().heldWrites).toBe(1);
    expect(server.activeStreams).toBe(1); // released in JavaScript, still held in the engine: not idle
    // The reader takes the bytes (credit flows back): the write completes, whole, and the channel is idle again.
    expect((await readAll(ours)).equals(reply)).toBe(true);
    await turnsUntil(() => server.activeStreams === 0);
    expect(server.stats()).toMatchObject({ heldWrites: 0, heldWriteFailures: 0 });
  });

  it("that fails is counted in its connection's stats, and the reader's read failed instead", async () => {
    const { client, server, accepted } = await pair(1024);
    const { ours, theirs } = await servedStream(client, accepted);
    expect(theirs.endWith!(Buffer.alloc(8 * 1024, 7))).toBe(WRITTEN);
    await turnsUntil(() => server.stats().heldWrites === 1);
    // The reader gives up without reading (STOP_SENDING with its code): the held bytes never reach it.
    ours.reset(new AgentError('CANCELLED', 'reader gave up'));
    await expect(ours.read()).rejects.toMatchObject({ code: 'CANCELLED' });
    await turnsUntil(() => server.stats().heldWrites === 0);
    expect(server.stats().heldWriteFailures).toBe(1);
    expect(server.activeStreams).toBe(0);
  });

  describe("a unary call whose request is held for the peer's credit fails typed rather than hangs", () => {
    /**
     * A caller agent, and a bare peer that dialled it granting 1 KiB per stream: the caller calls back over that
     * channel, and the peer does `cut` to the call's stream, unread, once its first bytes came.
     */
    async function callCut(cut: (stream: ChannelStream, channel: Channel) => void, requestBytes = 8 * 1024): Promise<{ error: unknown; held: number }> {
      const caller = await createAgent({ channels: [quic({ port: 0 })] });
      const peerIdentity = Identity.generate();
      const dialling = quic({ streamWindow: 1024 });
      let held = -1;
      const address = caller.addresses[0]!;
      const channel = await dialling.dial(new URL(address.slice(address.indexOf('@') + 1)), {
        ...transportContext(peerIdentity),
        onStream: (stream, channel) => {
          // Not read: the caller's request waits in its engine for credit (its first 1 KiB came, the rest cannot).
          setImmediate(() => {
            held = (caller.channels()[0] as QuicChannel).stats().heldWrites;
            cut(stream, channel);
          });
        },
        expectedPeer: caller.id,
        signal: AbortSignal.timeout(10_000),
      });
      cleanups.push(async () => {
        await channel.close();
        await caller.close();
        await dialling.close!();
      });
      await turnsUntil(() => caller.channels().length === 1);
      // A dial resumed from an earlier test's ticket hands the caller its channel at 0.5-RTT, where a request
      // keeps agentlink/1's way (written, then ended: not a held last write). The call waits for the handshake.
      await (caller.channels()[0] as QuicChannel).handshakeEnded();
      await new Promise((resolve) => setImmediate(resolve));
      const error = await caller.send(peerIdentity.id, 'echo', 'x'.repeat(requestBytes), { timeoutMs: 60_000 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      return { error, held };
    }

    it('when the peer resets the stream', async () => {
      const { error, held } = await callCut((stream) => stream.reset(new AgentError('RESOURCE_EXHAUSTED', 'request refused')));
      expect(held).toBe(1);
      expect(error).toBeInstanceOf(AgentError);
      expect(error).toMatchObject({ code: 'RESOURCE_EXHAUSTED' });
    });

    it('when the peer stops the request (STOP_SENDING) and keeps its own side open: at once, with its code, as a reset', async () => {
      // The peer will read no more and never ends its side: the held request fails in the engine, and the
      // caller's read of a reply that will not come ends with the peer's code after a grace of three PTOs (at
      // least 200 ms), as ws and HTTP/2 fail a call at the peer's stream reset. Before: the call's deadline.
      const { error, held } = await callCut((stream) => {
        expect((stream as unknown as { native: NativeStream }).native.stop(errorCodeToNumber('RESOURCE_EXHAUSTED'))).toBe(true);
      });
      expect(held).toBe(1);
      expect(error).toBeInstanceOf(AgentError);
      expect(error).toMatchObject({ code: 'RESOURCE_EXHAUSTED', remote: true });
      expect((error as AgentError).message).toMatch(/reset by peer/);
    });

    // Passed before the change too (the caller's write fails, and core fails the call on it): both paths agree.
    it('when the peer stops a request too large to be held (a write waiting for credit) and keeps its own side open', async () => {
      const { error, held } = await callCut((stream) => {
        expect((stream as unknown as { native: NativeStream }).native.stop(errorCodeToNumber('RESOURCE_EXHAUSTED'))).toBe(true);
      }, 64 * 1024);
      expect(held).toBe(0); // past the 16 KiB of a held last write: JavaScript's write waits for credit
      expect(error).toBeInstanceOf(AgentError);
      expect(error).toMatchObject({ code: 'RESOURCE_EXHAUSTED', remote: true });
    });

    it('when the connection closes', async () => {
      const { error, held } = await callCut((_stream, channel) => void channel.close(new AgentError('UNAVAILABLE', 'going away')));
      expect(held).toBe(1);
      expect(error).toBeInstanceOf(AgentError);
      expect((error as AgentError).code).not.toBe('DEADLINE_EXCEEDED');
    });
  });

  it("keeps its channel from the pool's idle close: a handler's reply still waiting for credit is not cut", async () => {
    // The server pool's idle checks and its clock are stepped; sockets and the engine run on the real clock.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'] });
    try {
      const server = await createAgent({ idleTimeoutMs: 1000, healthCheckIntervalMs: 0, channels: [quic({ port: 0 })] });
      cleanups.push(() => server.close());
      const reply = 'x'.repeat(8 * 1024);
      let handled!: () => void;
      const replied = new Promise<void>((resolve) => (handled = resolve));
      server.handle('big', () => {
        handled();
        return reply;
      });
      // A caller whose streams get 1 KiB of credit, and which does not read yet.
      const dialling = quic({ streamWindow: 1024 });
      const address = server.addresses[0]!;
      const client = await dialling.dial(new URL(address.slice(address.indexOf('@') + 1)), {
        ...transportContext(),
        expectedPeer: server.id,
        signal: AbortSignal.timeout(10_000),
      });
      cleanups.push(async () => {
        await client.close();
        await dialling.close!();
      });
      const stream = await client.openStream({ endsWithPeer: true, endsWithRequest: true });
      await stream.endWith!(encodeFrame({ type: 'request', method: 'big', timeoutMs: null, priority: 'normal', metadata: {}, body: null, mode: 'unary' }));
      await replied;
      const served = server.channels()[0] as QuicChannel;
      await turnsUntil(() => served.stats().heldWrites === 1); // the reply is in the engine, waiting for credit
      expect(served.activeStreams).toBe(1);
      vi.advanceTimersByTime(5000); // checks every 250 ms: idle for 1 s would be closed by now
      expect(served.isClosed).toBe(false);
      // The caller reads: the whole reply arrives; only then is the channel idle, and closed at the next checks.
      const bytes = await readAll(stream);
      expect(bytes.length).toBeGreaterThan(reply.length);
      expect(bytes.includes(Buffer.from(reply))).toBe(true);
      await turnsUntil(() => served.activeStreams === 0);
      expect(served.isClosed).toBe(false);
      vi.advanceTimersByTime(5000);
      expect(served.isClosed).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });
});
