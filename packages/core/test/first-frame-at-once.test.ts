import { afterEach, describe, expect, it } from 'vitest';
import { createAgent, type Agent } from '../src/index.js';
import type { ListenContext } from '../src/transport.js';
import { memoryTransport, type SentFrame } from './memory-transport.js';
import { muxPair } from './recording-mux.js';

/**
 * A stream's first frame that someone waits for leaves at once (the pipe's `flushAfter`), not at the end of the
 * turn: a streamed call's request (the caller's `for await` waits for the first item) and the first item of a
 * streamed reply. A unary call's request and reply keep sharing the turn's write with the other calls of the turn
 * (docs/architecture.md, "A stream's first token").
 */

const OPEN = 0;
const DATA = 1;
const FIN_FLAG = 0x80;
const tick = () => new Promise((resolve) => setImmediate(resolve));

/** Frame type (flags stripped) and the flush hints, for frames carrying stream data (OPEN and DATA). */
function dataFrames(sent: SentFrame[], from: SentFrame['from']): Array<{ type: number; fin: boolean; flushBefore: boolean; flushAfter: boolean }> {
  return sent
    .filter((s) => s.from === from && ((s.frame[0]! & 0x3f) === OPEN || (s.frame[0]! & 0x3f) === DATA))
    .map((s) => ({ type: s.frame[0]! & 0x3f, fin: (s.frame[0]! & FIN_FLAG) !== 0, flushBefore: s.flushBefore, flushAfter: s.flushAfter }));
}

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

async function recordedPair(): Promise<{ client: Agent; address: string; sent: SentFrame[] }> {
  const network = new Map<string, ListenContext>();
  const sent: SentFrame[] = [];
  const server = await createAgent({ channels: [memoryTransport(network, 'server', undefined, sent)] });
  const client = await createAgent({ channels: [memoryTransport(network, undefined, undefined, sent)] });
  agents.push(server, client);
  server.handle('echo', (body: unknown) => body);
  server.handleStream('burst', async function* (count: number) {
    for (let i = 0; i < count; i++) yield `token ${i}`; // a producer that never waits
  });
  return { client, address: server.addresses[0]!, sent };
}

describe('a stream\'s first frame leaves at once', () => {
  it('a streamed call: its request and its first item are flushed when written; the second item flushes what came before; a unary call flushes neither', async () => {
    const { client, address, sent } = await recordedPair();
    expect(await client.send(address, 'echo', 'warm-up')).toBe('warm-up'); // the channel is open: only calls below
    sent.length = 0;

    const items: unknown[] = [];
    for await (const item of client.stream(address, 'burst', 4)) items.push(item);
    expect(items).toEqual(['token 0', 'token 1', 'token 2', 'token 3']);
    const request = dataFrames(sent, 'dialer');
    expect(request[0]).toEqual({ type: OPEN, fin: false, flushBefore: false, flushAfter: true });
    const replies = dataFrames(sent, 'listener');
    expect(replies[0]).toEqual({ type: DATA, fin: false, flushBefore: false, flushAfter: true }); // item #0, alone
    expect(replies[1]).toMatchObject({ type: DATA, flushBefore: true, flushAfter: false }); // item #1
    expect(replies.slice(1).every((frame) => !frame.flushAfter)).toBe(true); // the rest of the burst is batched

    sent.length = 0;
    expect(await client.send(address, 'echo', 'x')).toBe('x');
    expect(dataFrames(sent, 'dialer')).toEqual([{ type: OPEN, fin: false, flushBefore: false, flushAfter: false }]);
    expect(dataFrames(sent, 'listener')).toEqual([{ type: DATA, fin: true, flushBefore: false, flushAfter: false }]);
  });

  it('the request of a streamed call reaches the pipe in the turn of the first next(), before it returns', async () => {
    const { client, address, sent } = await recordedPair();
    await client.send(address, 'echo', 'warm-up');
    sent.length = 0;
    const iterator = client.stream(address, 'burst', 1);
    const first = iterator.next();
    // Nothing has run but the synchronous part of next(): the request is in the pipe already, marked to leave now.
    expect(dataFrames(sent, 'dialer')).toEqual([{ type: OPEN, fin: false, flushBefore: false, flushAfter: true }]);
    expect(await first).toEqual({ done: false, value: 'token 0' });
    expect(await iterator.next()).toEqual({ done: true, value: undefined });
  });
});

describe('MuxStream.firstFrameAtOnce', () => {
  it('a stream we open leaves its first frame to the turn unless opened with firstWriteAtOnce', async () => {
    const { a } = muxPair();
    const hints: Array<{ flushBefore: boolean; flushAfter: boolean }> = [];
    // Records the hints the mux gives: the pair's pipe only delivers frames.
    const send = (a as unknown as { pipe: { send(m: Uint8Array, before?: boolean, after?: boolean): void } }).pipe;
    const deliver = send.send;
    send.send = (m, before, after) => {
      hints.push({ flushBefore: before === true, flushAfter: after === true });
      deliver(m, before, after);
    };
    await tick();

    const unary = await a.openStream({ endsWithPeer: true });
    await unary.write(Buffer.from('unary request'));
    const streamed = await a.openStream({ endsWithPeer: true, firstWriteAtOnce: true });
    await streamed.write(Buffer.from('stream request'));
    await streamed.write(Buffer.from('more'));
    expect(hints).toEqual([
      { flushBefore: false, flushAfter: false },
      { flushBefore: false, flushAfter: true },
      { flushBefore: true, flushAfter: false },
    ]);
  });

  it('on the side that accepted: the first item is flushed, a reply that ends the stream in its frame is not', async () => {
    const { a, b, accepted } = muxPair();
    const hints: Array<{ type: number; flushAfter: boolean }> = [];
    const pipe = (b as unknown as { pipe: { send(m: Uint8Array, before?: boolean, after?: boolean): void } }).pipe;
    const deliver = pipe.send;
    pipe.send = (m, before, after) => {
      hints.push({ type: m[0]!, flushAfter: after === true });
      deliver(m, before, after);
    };
    await tick();
    hints.length = 0;

    const unary = await a.openStream({ endsWithPeer: true });
    await unary.write(Buffer.from('request'));
    const streamed = await a.openStream({ endsWithPeer: true, firstWriteAtOnce: true });
    await streamed.write(Buffer.from('request'));
    while (accepted.length < 2) await tick();
    await accepted[0]!.endWith!(Buffer.from('reply'));
    await accepted[1]!.write(Buffer.from('item 0'));
    await accepted[1]!.write(Buffer.from('item 1'));
    expect(hints).toEqual([
      { type: DATA | FIN_FLAG, flushAfter: false },
      { type: DATA, flushAfter: true },
      { type: DATA, flushAfter: false },
    ]);
  });
});
