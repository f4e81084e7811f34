import { connect, constants, createServer, type ClientHttp2Stream, type Http2Server, type ServerHttp2Session } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { AgentError, Identity } from '@agentlink/core';
import type { ChannelStream } from '@agentlink/core/transport';
import { afterEach, expect, it } from 'vitest';
import { AGENTLINK_PATH, Http2Channel } from '../src/http2-channel.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

/** How a client stream ended: its response HEADERS' status, if any came, and its RST_STREAM code. */
function fate(stream: ClientHttp2Stream): Promise<{ responded: boolean; rstCode: number | undefined }> {
  let responded = false;
  stream.on('response', () => (responded = true));
  stream.on('error', () => undefined);
  stream.resume();
  return new Promise((resolve) => stream.on('close', () => resolve({ responded, rstCode: stream.rstCode })));
}

it('a stream that arrives after the channel was closed (in the same read as one before the close) is never handed on', async () => {
  // The retired close (docs/protocol.md "Retired channels") promises the peer that nothing it opened after the
  // decision to close was processed, and the peer resends such calls: a stream handed to the agent there would run
  // twice. node sends the GOAWAY and destroys the session only at the next turn, and a HEADERS already read is
  // delivered before that: two requests written in one turn reach the server in one read, the first closes the
  // channel, and the second must be refused, not served.
  const handed: ChannelStream[] = [];
  const sessions: ServerHttp2Session[] = [];
  let channel: Http2Channel | undefined;
  const server: Http2Server = createServer();
  server.on('session', (session: ServerHttp2Session) => {
    sessions.push(session);
    channel = new Http2Channel(session, Identity.generate().id, '127.0.0.1:1', 'remote', {
      onStream: (stream) => {
        handed.push(stream);
        void channel!.close(new AgentError('CLOSED', 'closing as a stream arrives'));
      },
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => server.close());
  const client = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  client.on('error', () => undefined);
  cleanups.push(() => client.destroy());
  await new Promise<void>((resolve) => client.once('remoteSettings', () => resolve()));

  const first = client.request({ ':method': 'POST', ':path': AGENTLINK_PATH }, { endStream: false });
  const second = client.request({ ':method': 'POST', ':path': AGENTLINK_PATH }, { endStream: false });
  const [, secondFate] = await Promise.all([fate(first), fate(second)]);

  expect(handed).toHaveLength(1);
  expect(secondFate.responded).toBe(false);
  expect(secondFate.rstCode).not.toBe(constants.NGHTTP2_NO_ERROR);
  await channel!.closed;
});
