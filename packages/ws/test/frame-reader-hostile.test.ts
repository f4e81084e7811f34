import { createAgent, type Agent } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
// The hand-written client (shared with the hostile suite): it upgrades itself, then writes whatever bytes it likes.
import { RawWebSocket } from '../../conformance/src/hostile/raw-websocket.js';
import { requestFrame } from '../../conformance/src/hostile/raw-peer.js';
import { webSocket } from '../src/index.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

const MUX_OPEN_FIN = 0x80;

/** A call to `method` on mux stream `id`, as one masked binary WebSocket frame with the zero key (as our clients send). */
function call(id: number, method: string, body: unknown = null): Buffer {
  const open = Buffer.alloc(5);
  open[0] = MUX_OPEN_FIN;
  open.writeUInt32BE(id, 1);
  return RawWebSocket.frame(Buffer.concat([open, requestFrame(method, body)]));
}

/** A masked frame with the zero key of any first byte (FIN, RSV bits, opcode) and payload. */
function frame(b0: number, payload: Buffer): Buffer {
  if (payload.length > 125) throw new Error('short frames only');
  return Buffer.concat([Buffer.from([b0, 0x80 | payload.length]), Buffer.alloc(4), payload]);
}

const close1000 = frame(0x88, Buffer.from([0x03, 0xe8]));
const rsv2 = frame(0xa2, Buffer.from([1, 2, 3]));

/**
 * Writes `bytes` to the server in pieces cut at `cuts` (each piece its own TLS record, hence its own read at the
 * server), then reads until the server closes; resolves with the status of the server's close frame.
 */
async function send(server: Agent, bytes: Buffer, cuts: number[]): Promise<number | undefined> {
  const url = new URL(server.addresses[0]!.slice(server.addresses[0]!.indexOf('@') + 1));
  const peer = await RawWebSocket.connect(url, url.pathname);
  expect(peer.status).toBe(101);
  let received = Buffer.alloc(0);
  peer.socket.on('data', (chunk: Buffer) => (received = Buffer.concat([received, chunk])));
  const closed = new Promise<void>((resolve) => peer.socket.once('close', () => resolve()));
  peer.socket.resume();
  let from = 0;
  for (const at of [...cuts, bytes.length]) {
    if (at <= from) continue;
    await new Promise<void>((resolve) => peer.socket.write(bytes.subarray(from, at), () => resolve()));
    from = at;
  }
  peer.socket.end();
  await closed;
  // The server's frames: unmasked; its close frame is 0x88, its status the first 2 bytes of the payload.
  for (let at = 0; at + 1 < received.length; ) {
    const length = received[at + 1]! & 0x7f;
    const header = length === 126 ? 4 : length === 127 ? 10 : 2;
    const payloadLength = length === 126 ? received.readUInt16BE(at + 2) : length === 127 ? Number(received.readBigUInt64BE(at + 2)) : length;
    if (received[at] === 0x88) return payloadLength >= 2 ? received.readUInt16BE(at + header) : undefined;
    at += header + payloadLength;
  }
  return undefined;
}

describe('the frame reader against a raw client on a real socket', () => {
  const cases: Array<[string, Buffer[], number, number]> = [
    // [what, the frames in order, calls served, the server's close status]
    ['a call, a close frame, a call', [call(1, 'count'), close1000, call(3, 'count')], 1, 1000],
    ['a call, a frame with RSV2 set (1002), a call', [call(1, 'count'), rsv2, call(3, 'count')], 1, 1002],
    ['two calls, a close frame, two calls', [call(1, 'count'), call(3, 'count'), close1000, call(5, 'count'), call(7, 'count')], 2, 1000],
  ];
  for (const [what, frames, served, status] of cases) {
    it(`${what}: only what comes before the close or the refusal is read, however the bytes are cut into reads`, async () => {
      const server = await createAgent({ channels: [webSocket({ port: 0 })] });
      agents.push(server);
      let calls = 0;
      server.handle('count', () => ++calls);
      const bytes = Buffer.concat(frames);
      const boundaries = frames.reduce<number[]>((at, f) => [...at, (at.at(-1) ?? 0) + f.length], []);
      // One read; a read per frame; reads that end inside each header and mask key; 7-byte reads.
      const cutsList = [[], boundaries, boundaries.flatMap((b) => [b + 1, b + 4]), Array.from({ length: Math.ceil(bytes.length / 7) }, (_, i) => 7 * (i + 1))];
      for (const cuts of cutsList) {
        calls = 0;
        expect(await send(server, bytes, cuts)).toBe(status);
        expect(calls).toBe(served);
      }
    });
  }
});

describe('the frame reader around a frame that spans reads', () => {
  it('serves calls in the order they came: before, across and after a frame ws reads in pieces', async () => {
    const server = await createAgent({ channels: [webSocket({ port: 0 })] });
    agents.push(server);
    const heard: string[] = [];
    server.handle('note', (body: unknown) => {
      heard.push(typeof body === 'string' && body.length > 100 ? `long ${body.length}` : String(body));
      return null;
    });
    // In one write: 16 KiB TLS records, so the long call's frame spans reads (ws's: a read of its 16 KiB is as much as
    // ws's Receiver takes without asking for a pause on Node 20) while the short calls around it are whole in their
    // reads (the reader's).
    const frames = [call(1, 'note', 'a'), call(3, 'note', 'x'.repeat(40_000)), call(5, 'note', 'b'), call(7, 'note', 'c'), close1000];
    expect(await send(server, Buffer.concat(frames), [])).toBe(1000);
    expect(heard).toEqual(['a', 'long 40000', 'b', 'c']);
  });
});
