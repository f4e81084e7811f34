import { createAgent, Identity, type Agent } from '@agentlink/core';
import { afterEach, expect, it, vi } from 'vitest';
import { quic } from '../src/index.js';
import type { NativeConnection, NativeStream } from '../src/native.js';
import { QuicChannel } from '../src/quic-channel.js';
import { QuicChannelStream } from '../src/quic-stream.js';
import { fakeConnection as idleConnection } from './fake-connection.js';

const agents: Agent[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

async function agent(): Promise<Agent> {
  const a = await createAgent({ channels: [quic({ port: 0 })] });
  a.handle('echo', (body: unknown) => body);
  a.handleStream('tokens', async function* (count: number) {
    for (let i = 0; i < count; i++) yield i;
  });
  agents.push(a);
  return a;
}

it("a call's request reaches the engine in the turn the call starts (openStreamNow): no promise hop before its first bytes", async () => {
  const server = await agent();
  const client = await agent();
  const address = server.addresses[0]!;
  expect(await client.send(address, 'echo', 'warm')).toBe('warm'); // the connection exists from now on
  const writes = vi.spyOn(QuicChannelStream.prototype, 'write');
  const lastWrites = vi.spyOn(QuicChannelStream.prototype, 'endWith');

  const reply = client.send(address, 'echo', 'now');
  // Before openStreamNow, the stream was opened by an async `openStream` and the request written a few microtasks
  // later: nothing had reached the stream yet at this point. (On agentlink/2 a unary request is the stream's last
  // write: `endWith`, request and end together.)
  expect(writes).toHaveBeenCalledTimes(0);
  expect(lastWrites).toHaveBeenCalledTimes(1);
  expect(await reply).toBe('now');

  writes.mockClear();
  const tokens = client.stream<number>(address, 'tokens', 3)[Symbol.asyncIterator]();
  const first = tokens.next(); // a streamed call starts with its first pull
  expect(writes).toHaveBeenCalledTimes(1);
  expect(await first).toEqual({ done: false, value: 0 });
  expect(await tokens.next()).toEqual({ done: false, value: 1 });
  expect(await tokens.next()).toEqual({ done: false, value: 2 });
  expect((await tokens.next()).done).toBe(true);
});

/** An idle engine connection where `open` decides what `tryOpenStream` does. */
function fakeConnection(open: () => NativeStream | null, earlyData: NativeConnection['earlyData'] = 'none'): NativeConnection {
  return idleConnection({ tryOpenStream: open, earlyData });
}

function recordingStream(): NativeStream & { written: Buffer[]; priority: number | undefined } {
  const stream = {
    written: [] as Buffer[],
    priority: undefined as number | undefined,
    tryWrite(data: Buffer): number {
      stream.written.push(Buffer.from(data));
      return data.length;
    },
    setPriority(priority: number): void {
      stream.priority = priority;
    },
  };
  return stream as unknown as NativeStream & { written: Buffer[]; priority: number | undefined };
}

it('openStreamNow: a stream at once when the engine opens one without waiting; undefined when it cannot, and then openStream decides', async () => {
  const native = recordingStream();
  const channel = new QuicChannel(fakeConnection(() => native), Identity.generate().id, 'local', () => undefined);
  const stream = channel.openStreamNow({ priority: 'critical' });
  expect(stream).toBeInstanceOf(QuicChannelStream);
  expect(native.priority).toBe(3);
  expect(channel.activeStreams).toBe(1);
  void stream!.write(Buffer.from('request'));
  expect(native.written.map(String)).toEqual(['request']); // the stream's first write is never held

  // The peer's stream limit is reached: nothing now (openStream waits for credit).
  const full = new QuicChannel(fakeConnection(() => null), Identity.generate().id, 'local', () => undefined);
  expect(full.openStreamNow()).toBeUndefined();
  expect(full.activeStreams).toBe(0);

  // The engine fails the open (the connection is gone): openStream reports it and closes the channel.
  const gone = new QuicChannel(
    fakeConnection(() => {
      throw new Error('UNAVAILABLE|connection reset by peer');
    }),
    Identity.generate().id,
    'local',
    () => undefined,
  );
  expect(gone.openStreamNow()).toBeUndefined();
  expect(gone.isClosed).toBe(false);
  await expect(gone.openStream()).rejects.toMatchObject({ code: 'UNAVAILABLE' });
  expect(gone.isClosed).toBe(true);
  expect(gone.openStreamNow()).toBeUndefined();
});

it('openStreamNow opens nothing while an early (0-RTT) handshake runs: openStream keeps deciding which calls ride it', () => {
  let opened = 0;
  const channel = new QuicChannel(
    fakeConnection(() => {
      opened++;
      return recordingStream();
    }, 'pending'),
    Identity.generate().id,
    'local',
    () => undefined,
  );
  expect(channel.openStreamNow({ idempotent: true })).toBeUndefined();
  expect(channel.openStreamNow()).toBeUndefined();
  expect(opened).toBe(0);
  expect(channel.earlyStreams).toBe(0);
});
