import { Identity } from '@agentlink/core';
import { expect, it } from 'vitest';
import type { NativeConnection, NativeStream } from '../src/native.js';
import { QuicChannel } from '../src/quic-channel.js';
import { fakeConnection } from './fake-connection.js';

/**
 * The engine's view of a connection a restarted peer has just reset: opening a stream fails at once, while the
 * `closed` notice is still on its way (it reaches JavaScript as a later macrotask; here it never does).
 */
function resetConnection(): NativeConnection {
  return fakeConnection({
    handshakeDone: () => Promise.resolve(true),
    tryOpenStream: () => {
      throw new Error('UNAVAILABLE|connection reset by peer');
    },
    openStream: () => Promise.reject(new Error('UNAVAILABLE|connection reset by peer')),
  });
}

it('a stream the engine cannot open closes the channel at once, before its closed notice: the pool dials anew', async () => {
  const channel = new QuicChannel(resetConnection(), Identity.generate().id, 'local', () => undefined);
  expect(channel.isClosed).toBe(false);
  await expect(channel.openStream()).rejects.toMatchObject({ code: 'UNAVAILABLE', message: 'connection reset by peer' });
  // Before, the channel stayed open until the notice came, and a caller retrying without leaving the microtask
  // queue was handed it again on every try (benchmarks/src/peer-death.ts: ~400,000 failed calls in 30 s).
  expect(channel.isClosed).toBe(true);
  await expect(channel.openStream()).rejects.toMatchObject({ code: 'UNAVAILABLE' });
});

/**
 * A 0-RTT connection whose peer rejected the early data: the stream sent in 0-RTT fails ZERO_RTT_REJECTED, and
 * the engine's own notice that the handshake ended (`handshakeDone`) has not reached JavaScript yet — the two
 * come by separate callbacks, in either order. Here the notice never comes.
 */
function rejectedZeroRttConnection(): NativeConnection {
  const never = new Promise<never>(() => undefined);
  const stream = (): NativeStream =>
    ({
      tryRead: () => {
        throw new Error('ZERO_RTT_REJECTED|0-RTT data rejected by the peer');
      },
      release: () => undefined,
    }) as unknown as NativeStream;
  return { ...resetConnection(), earlyData: 'pending', handshakeDone: () => never, tryOpenStream: stream, acceptStreams: () => never };
}

it('a stream the peer rejected in 0-RTT ends the early phase: the resend opened next is not counted as early', async () => {
  const channel = new QuicChannel(rejectedZeroRttConnection(), Identity.generate().id, 'local', () => undefined);
  const early = await channel.openStream({ idempotent: true });
  expect(channel.earlyStreams).toBe(1);
  await expect(early.read()).rejects.toMatchObject({ code: 'UNAVAILABLE', unprocessed: true });
  // Core resends an unprocessed call at once: its stream travels after the handshake, whatever the notice says.
  await channel.openStream({ idempotent: true });
  expect(channel.earlyStreams).toBe(1);
  // A call that is not replay-safe no longer waits for the notice either.
  await channel.openStream();
  expect(channel.earlyStreams).toBe(1);
});
