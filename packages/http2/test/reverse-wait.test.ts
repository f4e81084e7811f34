import { EventEmitter } from 'node:events';
import type { Http2Session } from 'node:http2';
import { Identity } from '@agentlink/core';
import { afterEach, expect, it, vi } from 'vitest';
import { Http2Channel } from '../src/http2-channel.js';

afterEach(() => {
  vi.useRealTimers();
});

/** A server session as the channel sees it: events, and closed/destroyed flags (no socket: nothing else is used). */
function serverSession(): Http2Session & EventEmitter {
  const session = new EventEmitter() as Http2Session & EventEmitter;
  Object.assign(session, { closed: false, destroyed: false, remoteSettings: {} });
  return session;
}

/** One turn of the event loop: settled promises have run their handlers. */
const aTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

it('a call back waiting for the reverse stream fails with the session\'s close when the session closes, not after the 5 s wait', async () => {
  // Only setTimeout is faked: the reverse wait's 5 s never elapse here, so only the close can settle the call.
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  const session = serverSession();
  const channel = new Http2Channel(session, Identity.generate().id, '127.0.0.1:1', 'remote', { onStream: () => undefined });
  let outcome: unknown;
  channel.openStream().then(
    () => (outcome = 'opened'),
    (error: unknown) => (outcome = error),
  );
  await aTurn();
  expect(outcome).toBeUndefined(); // waiting for the client's reverse stream

  session.emit('close');
  await aTurn();
  expect(outcome).toMatchObject({ code: 'UNAVAILABLE', message: expect.stringContaining('closed') });
  expect(await channel.closed).toBe(outcome);
});
