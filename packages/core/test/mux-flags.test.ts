import { describe, expect, it } from 'vitest';
import { AgentError } from '../src/index.js';
import { MuxedChannel, type ChannelStream } from '../src/transport.js';
import { muxPair as pair, recordingMux } from './recording-mux.js';


const tick = () => new Promise((resolve) => setImmediate(resolve));

/** A unary call's shape: the request with the opener's side ending with the peer's, the reply with the end. */
async function unaryExchange(a: MuxedChannel, accepted: ChannelStream[]): Promise<{ caller: ChannelStream; reply: string }> {
  const caller = await a.openStream({ endsWithPeer: true });
  await caller.write(Buffer.from('request'));
  while (accepted.length === 0) await tick();
  const callee = accepted.shift()!;
  expect(Buffer.from((await callee.read())!).toString()).toBe('request');
  await callee.endWith!(Buffer.from('response'));
  const reply = Buffer.from((await caller.read())!).toString();
  expect(await caller.read()).toBeUndefined();
  await caller.end(); // what a caller does after the reply: a no-op once its side ended with the peer's
  return { caller, reply };
}

describe('mux frame flags', () => {
  it('a unary exchange between peers with frame flags is two frames: OPEN+endsWithPeer and DATA+FIN; both sides release the stream', async () => {
    const { a, b, accepted, fromA, fromB } = pair();
    await tick(); // both SETTINGS delivered
    fromA.length = 0;
    fromB.length = 0;
    const { reply } = await unaryExchange(a, accepted);
    expect(reply).toBe('response');
    await tick();
    expect(fromA.map((m) => m[0])).toEqual([0x00 | 0x40]);
    expect(fromB.map((m) => m[0])).toEqual([0x01 | 0x80]);
    expect(a.activeStreams).toBe(0);
    expect(b.activeStreams).toBe(0);
  });

  it('toward a peer without frame flags: plain OPEN, DATA and FIN frames each way, and the stream is still released', async () => {
    const { a, b, accepted, fromA, fromB } = pair(true);
    await tick();
    fromA.length = 0;
    fromB.length = 0;
    const { reply } = await unaryExchange(a, accepted);
    expect(reply).toBe('response');
    await tick();
    expect(fromA.map((m) => m[0])).toEqual([0, 3]); // OPEN with the request; the caller's FIN after the reply
    expect(fromB.map((m) => m[0])).toEqual([0x01 | 0x80]); // a (new) announced flags: b may fold its FIN
    expect(a.activeStreams).toBe(0);
    expect(b.activeStreams).toBe(0);
  });

  it('a peer that sent its FIN inside its first frame: the receiver reads the bytes, then the end', async () => {
    const { a, accepted } = pair();
    await tick();
    const stream = await a.openStream();
    await stream.endWith!(Buffer.from('all of it'));
    while (accepted.length === 0) await tick();
    const remote = accepted[0]!;
    expect(Buffer.from((await remote.read())!).toString()).toBe('all of it');
    expect(await remote.read()).toBeUndefined();
  });

  it('an opener whose side ends with the peer\'s can still cancel: a RESET reaches the peer before its end', async () => {
    const { a, accepted } = pair();
    await tick();
    const caller = await a.openStream({ endsWithPeer: true });
    await caller.write(Buffer.from('request'));
    while (accepted.length === 0) await tick();
    const callee = accepted[0]!;
    await callee.read();
    caller.reset(new AgentError('CANCELLED', 'gave up'));
    await expect(callee.read()).rejects.toMatchObject({ code: 'CANCELLED' });
  });

  it('a write waiting for credit when the peer ends a stream whose opener ends with it fails with CLOSED, not forever', async () => {
    const { a, accepted } = pair();
    await tick();
    const caller = await a.openStream({ endsWithPeer: true });
    const written = caller.write(Buffer.alloc(1024 * 1024, 1)); // four windows: waits for grants
    while (accepted.length === 0) await tick();
    await accepted[0]!.endWith!(Buffer.from('refused early'));
    await expect(written).rejects.toMatchObject({ code: 'CLOSED' });
  });

  it('flags on a frame that takes none close the channel with PROTOCOL_ERROR', async () => {
    for (const typeByte of [0x02 | 0x80, 0x03 | 0x80, 0x01 | 0x40, 0x04 | 0x40]) {
      const { b } = pair();
      await tick();
      const frame = Buffer.alloc(9);
      frame[0] = typeByte;
      frame.writeUInt32BE(1, 1);
      b.receive(frame);
      await expect(b.closed).resolves.toMatchObject({ code: 'PROTOCOL_ERROR' });
    }
  });
  it('ending a stream that sent nothing through a congested pipe sends its OPEN and FIN, and returns', async () => {
    let buffered = 0;
    const { channel, sent } = recordingMux(() => buffered);
    const settings = Buffer.alloc(9);
    settings[0] = 6;
    settings.writeUInt32BE(1, 1); // the peer announces frame flags
    settings.writeUInt32BE(256 * 1024, 5);
    channel.receive(settings);
    buffered = 2 * 1024 * 1024; // over the high-water mark: the pipe is congested
    sent.length = 0;
    const stream = await channel.openStream();
    await stream.end(); // it once looped through endWith and end on microtasks, and never returned
    expect(sent.map((frame) => [frame[0], frame.readUInt32BE(1)])).toEqual([[0, 1], [3, 1]]); // OPEN, then FIN
  });
});
