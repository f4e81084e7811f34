import { AgentError, createAgent, Identity } from '@agentlink/core';
import { encodeFrame, selfSignedCertificate, WRITTEN, type Channel, type ChannelStream, type ListenContext } from '@agentlink/core/transport';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { quic } from '../src/index.js';

/**
 * A stream's last write up to 16 KiB is handed to the engine's thread whole (`tryWriteFinish`, so the write and
 * its end leave in one packet). Taken is not written: when the peer's credit is short, the bytes wait there. Such
 * a write must not be reported as written until they went, its failure must reach the writer, and the stream must
 * count as open meanwhile (so a pool's idle close does not cut it). Before, `endWith` said WRITTEN at once, the
 * stream was released, and a failure of the held bytes was dropped in the engine.
 */

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

function transportContext(identity = Identity.generate()): Omit<ListenContext, 'onChannel'> {
  return { identity, tls: selfSignedCertificate(identity), onStream: () => undefined };
}

/** The dialler's streams get at most `window` bytes of credit; the listener hands us the streams it accepts. */
async function pair(window: number): Promise<{ client: Channel; server: Channel; accepted(): Promise<ChannelStream> }> {
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
  return { client, server: await serverChannel, accepted };
}

/** Opens a stream and has the listener's side of it (the request's bytes read, our end reached). */
async function servedStream(client: Channel, accepted: () => Promise<ChannelStream>): Promise<{ ours: ChannelStream; theirs: ChannelStream }> {
  const ours = await client.openStream();
  await ours.write(Buffer.from('request'));
  await ours.end();
  const theirs = await accepted();
  const chunks: Uint8Array[] = [];
  for (let chunk = await theirs.read(); chunk; chunk = await theirs.read()) chunks.push(chunk);
  expect(Buffer.concat(chunks).toString()).toBe('request');
  return { ours, theirs };
}

/** Reads `stream` to its end: the bytes. */
async function readAll(stream: ChannelStream): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for (let chunk = await stream.read(); chunk; chunk = await stream.read()) chunks.push(chunk);
  return Buffer.concat(chunks);
}

const settledState = (promise: Promise<void>): Promise<string> =>
  Promise.race([promise.then(() => 'written', () => 'failed'), new Promise<string>((resolve) => setImmediate(() => resolve('pending')))]);

describe('QUIC: a last write the engine holds for credit', () => {
  it('is written only once the peer gave credit for it; the stream counts as open until then', async () => {
    const { client, server, accepted } = await pair(1024);
    const { ours, theirs } = await servedStream(client, accepted);
    const reply = Buffer.alloc(8 * 1024, 7); // past the peer's 1 KiB window, within the 16 KiB last-write path
    const written = theirs.endWith!(reply);
    expect(written).not.toBe(WRITTEN);
    // A round trip on another stream: the held write has had every chance to go, and cannot (no credit).
    const other = await servedStream(client, accepted);
    await other.theirs.endWith!(Buffer.from('ok'));
    expect((await readAll(other.ours)).toString()).toBe('ok');
    expect(await settledState(written)).toBe('pending');
    expect(server.activeStreams).toBe(1); // the reply's stream is not idle: its bytes are not all out
    // The reader takes the bytes (credit flows back): the write completes, whole, and the stream is done.
    const read = readAll(ours);
    await written;
    expect((await read).equals(reply)).toBe(true);
    expect(server.activeStreams).toBe(0);
  });

  it('that fails reports the failure to its writer, typed, with the peer\'s code', async () => {
    const { client, accepted } = await pair(1024);
    const { ours, theirs } = await servedStream(client, accepted);
    const written = theirs.endWith!(Buffer.alloc(8 * 1024, 7));
    expect(await settledState(written)).toBe('pending');
    // The reader gives up without reading (STOP_SENDING with its code): the held bytes never reach it.
    ours.reset(new AgentError('CANCELLED', 'reader gave up'));
    const error = await written.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(AgentError);
    expect(error).toMatchObject({ code: 'CANCELLED', remote: true });
    await expect(theirs.end()).rejects.toMatchObject({ code: 'CANCELLED' });
  });

  it('cut by its channel closing (an idle close that came anyway) fails its writer', async () => {
    const { client, server, accepted } = await pair(1024);
    const { theirs } = await servedStream(client, accepted);
    const written = theirs.endWith!(Buffer.alloc(8 * 1024, 7));
    expect(await settledState(written)).toBe('pending');
    await server.close(new AgentError('CLOSED', 'idle for 10 ms'));
    await expect(written).rejects.toMatchObject({ code: 'CLOSED' });
    expect(server.activeStreams).toBe(0);
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
      await new Promise((resolve) => setImmediate(resolve)); // the reply is in the engine, waiting for credit
      const [served] = server.channels();
      expect(served!.activeStreams).toBe(1);
      vi.advanceTimersByTime(5000); // checks every 250 ms: idle for 1 s would be closed by now
      expect(served!.isClosed).toBe(false);
      // The caller reads: the whole reply arrives, and only then is the stream done.
      const bytes = await readAll(stream);
      expect(bytes.length).toBeGreaterThan(reply.length);
      expect(bytes.includes(Buffer.from(reply))).toBe(true);
      while (served!.activeStreams > 0) await new Promise((resolve) => setImmediate(resolve));
      expect(served!.isClosed).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });
});
