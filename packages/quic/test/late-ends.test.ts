import { AgentError, Identity } from '@agentlink/core';
import { WRITTEN } from '@agentlink/core/transport';
import { expect, it } from 'vitest';
import type { NativeStream } from '../src/native.js';
import { QuicChannel } from '../src/quic-channel.js';
import { fakeConnection } from './fake-connection.js';

/**
 * Engine streams that log what is asked of them: each answers one read with a reply and the next with the peer's
 * end (pull reads: the fake connection does not push).
 */
function loggingConnection(log: string[]) {
  let opened = 0;
  const stream = (): NativeStream => {
    const id = ++opened;
    let reads = 0;
    return {
      tryWrite: (data: Buffer) => (log.push(`write ${id}`), data.length),
      tryWriteFinish: (data: Buffer) => (log.push(`write and finish ${id}`), data.length),
      tryRead: () => (reads++ === 0 ? Buffer.from('reply') : Buffer.alloc(0)),
      tryFinish: () => (log.push(`finish ${id}`), true),
      release: () => void log.push(`release ${id}`),
      reset: () => void log.push(`reset ${id}`),
    } as unknown as NativeStream;
  };
  return fakeConnection({ tryOpenStream: stream });
}

async function finishedCall(channel: QuicChannel): Promise<void> {
  const stream = channel.openStreamNow()!;
  expect(await stream.write(Buffer.from('request'))).toBeUndefined();
  expect(Buffer.from((await stream.read())!).toString()).toBe('reply');
  expect(await stream.read()).toBeUndefined(); // the peer ended its side: the call is over
  expect(stream.end()).toBe(WRITTEN);
}

it("a caller's end after the peer ended leaves with the connection's next bytes: one release, before them", async () => {
  const log: string[] = [];
  const channel = new QuicChannel(loggingConnection(log), Identity.generate().id, 'local', () => undefined);
  await finishedCall(channel);
  // Not sent on its own, yet the stream no longer counts.
  expect(log).toEqual(['write 1']);
  expect(channel.activeStreams).toBe(0);
  const next = channel.openStreamNow()!;
  await next.write(Buffer.from('request'));
  // Released (which ends it: the engine finishes a send half it drops) just before the next request: one packet.
  expect(log).toEqual(['write 1', 'release 1', 'write 2']);
  next.reset(new AgentError('CANCELLED', 'done'));
});

it("a held end leaves by the end of the turn when nothing else is written, and a reset after it changes nothing", async () => {
  const log: string[] = [];
  const channel = new QuicChannel(loggingConnection(log), Identity.generate().id, 'local', () => undefined);
  const stream = channel.openStreamNow()!;
  await stream.write(Buffer.from('request'));
  await stream.read();
  await stream.read();
  stream.end();
  stream.reset(new AgentError('CANCELLED', 'too late'));
  await expect(stream.write(Buffer.from('more'))).rejects.toMatchObject({ code: 'CANCELLED' });
  expect(log).toEqual(['write 1']);
  await new Promise((resolve) => setImmediate(resolve));
  expect(log).toEqual(['write 1', 'release 1']);
});

it('an end before the peer ended is sent at once, as before', async () => {
  const log: string[] = [];
  const channel = new QuicChannel(loggingConnection(log), Identity.generate().id, 'local', () => undefined);
  const stream = channel.openStreamNow()!;
  await stream.write(Buffer.from('request'));
  expect(stream.end()).toBe(WRITTEN);
  expect(log).toEqual(['write 1', 'finish 1']);
});
