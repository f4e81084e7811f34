import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { AgentError } from '../src/index.js';
import type { ChannelStream } from '../src/channel.js';
import { decodePayload, encodeFrame, encodeSmallItem, FRAME_HEADER_BYTES } from '../src/wire/codec.js';
import { FrameDecoder } from '../src/wire/frame-decoder.js';
import { FramedStream, ITEM_BATCH_BYTES } from '../src/wire/framed-stream.js';
import type { WireMessage } from '../src/wire/messages.js';
import { StreamItems } from '../src/agent/call-results.js';
import { ItemIterator } from '../src/agent/item-iterator.js';
import { ByteBudget } from '../src/agent/byte-budget.js';

/** A ChannelStream that records every write; `hold` makes writes wait until `release`. */
class RecordingStream implements ChannelStream {
  readonly writes: Uint8Array[] = [];
  ended = false;
  private held: Array<() => void> = [];
  hold = false;
  failure: AgentError | undefined;

  write(chunk: Uint8Array): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    this.writes.push(Buffer.from(chunk));
    if (!this.hold) return Promise.resolve();
    return new Promise((resolve) => this.held.push(resolve));
  }
  endWith(chunk: Uint8Array): Promise<void> {
    return this.write(chunk).then(() => void (this.ended = true));
  }
  async end(): Promise<void> {
    this.ended = true;
  }
  async read(): Promise<Uint8Array | undefined> {
    return undefined;
  }
  reset(reason: AgentError): void {
    this.failure = reason;
  }
  release(): void {
    this.hold = false;
    for (const resolve of this.held.splice(0)) resolve();
  }
  messages(): WireMessage[] {
    const decoder = new FrameDecoder();
    return this.writes.flatMap((chunk) => decoder.push(chunk)).map((payload) => decodePayload(payload));
  }
}

/** A stream whose peer takes nothing (writes wait) and sends `incoming`; a reset fails the waiting writes, as a transport's does. */
class StalledStream implements ChannelStream {
  readonly incoming: Uint8Array[] = [];
  private waiting: Array<(error: AgentError) => void> = [];
  private failure: AgentError | undefined;

  write(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((_, reject) => this.waiting.push(reject));
  }
  async end(): Promise<void> {}
  async read(): Promise<Uint8Array | undefined> {
    if (this.failure) throw this.failure;
    return this.incoming.shift();
  }
  reset(reason: AgentError): void {
    this.failure ??= reason;
    for (const fail of this.waiting.splice(0)) fail(reason);
  }
}

const nextTick = (): Promise<void> => new Promise((resolve) => process.nextTick(resolve));
const packr = new Packr({ useRecords: false, moreTypes: false, int64AsType: 'number', mapsAsObjects: true, encodeUndefinedAsNil: true });

describe('small item frames (encodeSmallItem / the decoder fast path)', () => {
  it('decode to what msgpackr decodes from the same bytes, for short binary and ASCII bodies, and agree with encodeFrame', () => {
    const bodies = fc.oneof(
      fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)),
      fc.string({ maxLength: 300 }),
      fc.string({ maxLength: 300, unit: 'binary' }),
      fc.constantFrom(0, null, true, { a: 1 }, [1, 2]),
    );
    fc.assert(
      fc.property(bodies, (body) => {
        const target = Buffer.alloc(2048);
        const end = encodeSmallItem(body, target, 3);
        const reference = decodePayload(encodeFrame({ type: 'item', body }).subarray(FRAME_HEADER_BYTES));
        if (end < 0) return; // the general path writes it
        const frame = target.subarray(3, end);
        expect(frame.readUInt32BE(0)).toBe(frame.length - FRAME_HEADER_BYTES);
        const payload = frame.subarray(FRAME_HEADER_BYTES);
        expect(decodePayload(payload)).toEqual(reference);
        expect(decodePayload(payload)).toEqual({ type: 'item', body: packr.unpack(payload)[1] });
      }),
      { numRuns: 500 },
    );
  });

  it('take ASCII strings up to 255 characters and binary bodies up to 255 bytes, nothing else', () => {
    const target = Buffer.alloc(2048);
    expect(encodeSmallItem('x'.repeat(255), target, 0)).toBe(8 + 255);
    expect(encodeSmallItem('x'.repeat(31), target, 0)).toBe(7 + 31);
    expect(encodeSmallItem('x'.repeat(256), target, 0)).toBe(-1);
    expect(encodeSmallItem('é', target, 0)).toBe(-1);
    expect(encodeSmallItem(Buffer.alloc(255), target, 0)).toBe(8 + 255);
    expect(encodeSmallItem(Buffer.alloc(256), target, 0)).toBe(-1);
    expect(encodeSmallItem(Buffer.alloc(10), Buffer.alloc(17), 0)).toBe(-1); // no room
  });
});

describe('FramedStream.sendItem', () => {
  it('writes the first two items alone, then one batch per turn, in order, before the end', async () => {
    const stream = new RecordingStream();
    const framed = new FramedStream(stream, 1024 * 1024);
    for (let i = 0; i < 100; i++) expect(await framed.sendItem(`token ${i}`)).toBeUndefined();
    expect(stream.writes.length).toBe(2);
    await nextTick();
    expect(stream.writes.length).toBe(3); // items 3..100 in one write
    await framed.sendLast({ type: 'end' });
    expect(stream.ended).toBe(true);
    const messages = stream.messages();
    expect(messages.slice(0, 100)).toEqual(Array.from({ length: 100 }, (_, i) => ({ type: 'item', body: `token ${i}` })));
    expect(messages[100]).toEqual({ type: 'end' });
  });

  it('writes a batch once it holds ITEM_BATCH_BYTES, and holds the producer while the transport has not taken it', async () => {
    const stream = new RecordingStream();
    const framed = new FramedStream(stream, 1024 * 1024);
    await framed.sendItem('a');
    await framed.sendItem('b');
    stream.hold = true;
    const token = Buffer.alloc(100, 1);
    let held: Promise<void> | undefined;
    let sent = 0;
    while (!held) {
      held = framed.sendItem(token);
      sent++;
    }
    expect(stream.writes.length).toBe(3);
    expect(stream.writes[2]!.length).toBeGreaterThanOrEqual(ITEM_BATCH_BYTES);
    expect(sent * 108).toBeGreaterThanOrEqual(ITEM_BATCH_BYTES);
    let released = false;
    void held.then(() => (released = true));
    await nextTick();
    expect(released).toBe(false);
    // Items the producer sends while it should wait are batched behind the write, not written past it.
    expect(framed.sendItem(token)).toBe(held);
    stream.release();
    await held;
    expect(released).toBe(true);
    await framed.sendLast({ type: 'end' });
    expect(stream.messages().length).toBe(2 + sent + 1 + 1);
  });

  it('reports a failed batch write at the next item, and the end fails with it', async () => {
    const stream = new RecordingStream();
    const framed = new FramedStream(stream, 1024 * 1024);
    await framed.sendItem(1);
    await framed.sendItem(2);
    framed.sendItem(3);
    stream.reset(new AgentError('CANCELLED', 'caller left'));
    await nextTick();
    await nextTick();
    await expect(framed.sendItem(4)!).rejects.toMatchObject({ code: 'CANCELLED' });
    await expect(framed.sendLast({ type: 'end' })).rejects.toMatchObject({ code: 'CANCELLED' });
  });

  it('writes a large item on its own after the batch, and refuses an item over maxFrameSize', async () => {
    const stream = new RecordingStream();
    const framed = new FramedStream(stream, 64 * 1024);
    await framed.sendItem('a');
    await framed.sendItem('b');
    framed.sendItem('c');
    await framed.sendItem(Buffer.alloc(32 * 1024, 2));
    expect(stream.messages().map((m) => (m.type === 'item' && typeof m.body === 'string' ? m.body : 'big'))).toEqual(['a', 'b', 'c', 'big']);
    const small = new FramedStream(new RecordingStream(), 100);
    small.sendItem(1);
    small.sendItem(2);
    expect(() => small.sendItem('x'.repeat(200))).toThrow(expect.objectContaining({ code: 'FRAME_TOO_LARGE' }));
  });
});

describe('FramedStream: a stream\'s first two items (written alone)', () => {
  it('are the bytes encodeFrame writes, for every body, short ones written without msgpackr', async () => {
    const bodies = fc.oneof(
      fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)),
      fc.string({ maxLength: 300 }),
      fc.string({ maxLength: 300, unit: 'binary' }),
      fc.constantFrom(0, null, true, { a: 1 }, [1, 2]),
    );
    await fc.assert(
      fc.asyncProperty(bodies, bodies, async (first, second) => {
        const stream = new RecordingStream();
        const framed = new FramedStream(stream, 1024 * 1024);
        await framed.sendItem(first);
        await framed.sendItem(second);
        expect(stream.writes.map((w) => Buffer.from(w))).toEqual([encodeFrame({ type: 'item', body: first }), encodeFrame({ type: 'item', body: second })]);
      }),
    );
  });

  it('refuses a first item over maxFrameSize as send does, writing nothing', () => {
    const stream = new RecordingStream();
    const framed = new FramedStream(stream, 100);
    expect(() => framed.sendItem('x'.repeat(200))).toThrow(expect.objectContaining({ code: 'FRAME_TOO_LARGE' }));
    expect(() => framed.sendItem(Buffer.alloc(200))).toThrow(expect.objectContaining({ code: 'FRAME_TOO_LARGE' }));
    expect(stream.writes).toEqual([]);
  });
});

describe('FramedStream write order and memory with a producer that does not wait', () => {
  const label = (m: WireMessage): string => (m.type === 'item' ? (typeof m.body === 'string' ? m.body : `${(m.body as Buffer).length} bytes`) : m.type);

  it('keeps every item, message and the end in the order sent, whatever waits for credit', async () => {
    // An interceptor's onItem may drop the promise sendItem returns: nothing may overtake what was sent before.
    const stream = new RecordingStream();
    const framed = new FramedStream(stream, 1024 * 1024);
    stream.hold = true;
    const sent: string[] = [];
    const item = (body: string | Buffer): void => {
      void framed.sendItem(body)?.catch(() => undefined);
      sent.push(typeof body === 'string' ? body : `${body.length} bytes`);
    };
    for (let i = 0; i < 60; i++) item('t'.repeat(250) + i);
    item(Buffer.alloc(20 * 1024, 7)); // too large for the batch's room: written on its own
    item('after big');
    void framed.send({ type: 'response', body: 'held reply' }).catch(() => undefined);
    sent.push('response');
    item('after response');
    await nextTick();
    const ended = framed.sendLast({ type: 'end' });
    sent.push('end');
    stream.release();
    await ended;
    expect(stream.messages().map(label)).toEqual(sent);
  });

  it('charges the send budget with batched and queued bytes, so a peer that takes nothing meets the budget', async () => {
    const stream = new RecordingStream();
    const evicted: AgentError[] = [];
    const budget = new ByteBudget(64 * 1024, undefined, 'unread replies');
    const framed = new FramedStream(stream, 1024 * 1024, undefined, budget);
    framed.evict = (reason: AgentError) => void evicted.push(reason);
    stream.hold = true; // the peer reads nothing
    let sent = 0;
    while (sent < 2_000 && evicted.length === 0) {
      void framed.sendItem(Buffer.alloc(100, sent % 256))?.catch(() => undefined);
      sent++;
    }
    // The budget saw the bytes pass its 64 KiB (108 bytes a frame) and evicted the stream then, not later.
    expect(evicted).toHaveLength(1);
    expect(evicted[0]!.code).toBe('RESOURCE_EXHAUSTED');
    expect(sent).toBe(Math.floor((64 * 1024) / 108) + 1);
  });

  it('an eviction by the unfinished-frame budget leaves nothing of the stream in the send budget once its writes fail', async () => {
    // One FramedStream is held by two budgets: what its peer's unfinished frame holds, and its own unsent replies.
    const stream = new StalledStream();
    const frames = new ByteBudget(1024, undefined, 'unfinished frames');
    const replies = new ByteBudget(1024 * 1024, undefined, 'unread replies');
    const framed = new FramedStream(stream, 1024 * 1024, frames, replies);
    const reply = framed.send({ type: 'response', body: Buffer.alloc(100, 7) }).catch((error: AgentError) => error.code);
    expect(replies.heldBytes).toBe(4 * 1024); // the held reply, told in a 4 KiB step
    // The peer begins a frame larger than its budget: that budget evicts the stream, whose reset fails the reply.
    const partial = Buffer.alloc(FRAME_HEADER_BYTES + 2_000);
    partial.writeUInt32BE(10_000, 0);
    stream.incoming.push(partial);
    const read = framed.receive().catch((error: AgentError) => error.code);
    expect(await reply).toBe('RESOURCE_EXHAUSTED');
    expect(await read).toBe('RESOURCE_EXHAUSTED');
    expect(frames.heldBytes).toBe(0);
    // The reply budget dropped nothing itself: the stream must not be left in it (with the steps, the release to 0
    // was not told after the eviction, and the 4 KiB stayed counted, and the stream referenced, for good).
    expect(replies.heldBytes).toBe(0);
    expect(replies.exhausted).toBe(false);
  });

  it('tells the send budget what it holds in 4 KiB steps, rounded up: never less, and not once per item', () => {
    const stream = new RecordingStream();
    stream.hold = true; // nothing is taken: every byte encoded stays held
    const charges: number[] = [];
    const budget = new ByteBudget(1024 * 1024, undefined, 'unread replies');
    const recording = { set: (holder: Parameters<ByteBudget['set']>[0], bytes: number) => (charges.push(bytes), budget.set(holder, bytes)) } as ByteBudget;
    const framed = new FramedStream(stream, 1024 * 1024, undefined, recording);
    const items = 3_000;
    for (let sent = 1; sent <= items; sent++) {
      void framed.sendItem(Buffer.alloc(16, sent % 256))?.catch(() => undefined);
      const held = sent * (FRAME_HEADER_BYTES + 4 + 16); // every item's frame, batched or queued
      expect(budget.heldBytes).toBeGreaterThanOrEqual(held);
      expect(budget.heldBytes).toBeLessThan(held + 4096);
    }
    expect(charges.every((bytes) => bytes % 4096 === 0)).toBe(true);
    expect(charges.length).toBeLessThanOrEqual(Math.ceil((items * 24) / 4096) + 1);
  });

  it('releases what it charged once the transport took it, and what was batched once a write failed', async () => {
    const stream = new RecordingStream();
    const budget = new ByteBudget(1024 * 1024, undefined, 'unread replies');
    const framed = new FramedStream(stream, 1024 * 1024, undefined, budget);
    for (let i = 0; i < 50; i++) await framed.sendItem('token');
    expect(budget.heldBytes).toBeGreaterThan(0); // batched, not written yet
    await nextTick();
    await framed.sendLast({ type: 'end' });
    expect(budget.heldBytes).toBe(0);

    const failing = new RecordingStream();
    const second = new FramedStream(failing, 1024 * 1024, undefined, budget);
    failing.hold = true;
    for (let i = 0; i < 2; i++) void second.sendItem('first')?.catch(() => undefined);
    for (let i = 0; i < 50; i++) void second.sendItem('token')?.catch(() => undefined);
    failing.reset(new AgentError('CANCELLED', 'caller left'));
    failing.release();
    await expect(second.sendLast({ type: 'end' })).rejects.toMatchObject({ code: 'CANCELLED' });
    expect(budget.heldBytes).toBe(0);
  });
});

describe('ItemIterator', () => {
  it('starts nothing until the first next(), and a throw there rejects it', async () => {
    let opened = 0;
    const items = new StreamItems<number>();
    const iterator = new ItemIterator(() => {
      opened++;
      return items;
    }, () => undefined);
    expect(opened).toBe(0);
    items.onItem(1);
    expect(await iterator.next()).toEqual({ done: false, value: 1 });
    expect(opened).toBe(1);
    const failing = new ItemIterator<number>(() => {
      throw new AgentError('INVALID_ARGUMENT', 'bad');
    }, () => undefined);
    await expect(failing.next()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(await failing.next()).toEqual({ done: true, value: undefined });
    // return() before the first next(): never opened.
    const unopened = new ItemIterator<number>(() => {
      opened++;
      return items;
    }, () => undefined);
    expect(await unopened.return()).toEqual({ done: true, value: undefined });
    expect(await unopened.next()).toEqual({ done: true, value: undefined });
    expect(opened).toBe(1);
  });

  it('return(value) resolves with the value, awaited, as an async generator does', async () => {
    async function* generator(): AsyncGenerator<number, unknown> {
      yield 1;
      return undefined;
    }
    const iterator = new ItemIterator<number>(() => new StreamItems<number>(), () => undefined) as unknown as AsyncGenerator<number, unknown>;
    for (const value of ['given', Promise.resolve('awaited')]) {
      expect(await iterator.return(value)).toEqual(await generator().return(value));
    }
    expect(await iterator.return(Promise.resolve('awaited'))).toEqual({ done: true, value: 'awaited' });
  });

  it('calls onLeftEarly when the consumer breaks out before the end, not after the end or an error', async () => {
    const left: string[] = [];
    const run = async (finish: (items: StreamItems<number>) => void, stopAt?: number): Promise<unknown> => {
      const items = new StreamItems<number>();
      for (let i = 0; i < 3; i++) items.onItem(i);
      finish(items);
      const seen: number[] = [];
      try {
        for await (const item of new ItemIterator(() => items, () => left.push(`left at ${seen.length}`))) {
          seen.push(item);
          if (item === stopAt) break;
        }
      } catch (error) {
        return error;
      }
      return seen;
    };
    expect(await run((items) => items.onEnd())).toEqual([0, 1, 2]);
    expect(await run((items) => items.onError(new AgentError('HANDLER_ERROR', 'boom')))).toMatchObject({ code: 'HANDLER_ERROR' });
    expect(left).toEqual([]);
    expect(await run(() => undefined, 1)).toEqual([0, 1]);
    expect(left).toEqual(['left at 2']);
  });

  it('hands out items that arrive while it waits, queues concurrent next() calls in order, and ends after the end', async () => {
    const items = new StreamItems<string>();
    const iterator = new ItemIterator(() => items, () => undefined);
    const first = iterator.next();
    const second = iterator.next();
    items.onItem('a');
    items.onItem('b');
    items.onEnd();
    expect(await first).toEqual({ done: false, value: 'a' });
    expect(await second).toEqual({ done: false, value: 'b' });
    expect(await iterator.next()).toEqual({ done: true, value: undefined });
    expect(await iterator.next()).toEqual({ done: true, value: undefined });
  });

  it('gives no buffered item after the call was aborted', async () => {
    let aborted: AgentError | undefined;
    const items = new StreamItems<number>(() => aborted);
    items.onItem(1);
    items.onItem(2);
    const iterator = new ItemIterator(() => items, () => undefined);
    expect(await iterator.next()).toEqual({ done: false, value: 1 });
    aborted = new AgentError('CANCELLED', 'stop');
    await expect(iterator.next()).rejects.toBe(aborted);
    expect(await iterator.next()).toEqual({ done: true, value: undefined });
  });
});

describe('StreamItems read-ahead', () => {
  it('holds the network read at 8 items and lets it go once the consumer took half of them', async () => {
    const items = new StreamItems<number>();
    for (let i = 0; i < 7; i++) expect(items.onItem(i)).toBeUndefined();
    const held = items.onItem(7);
    expect(held).toBeInstanceOf(Promise);
    let released = false;
    void held!.then(() => (released = true));
    for (let i = 0; i < 3; i++) items.poll();
    await nextTick();
    expect(released).toBe(false); // 5 left
    items.poll();
    await held;
    expect(released).toBe(true); // 4 left: half
  });
});

describe('the decoder fast path on short and broken item frames', () => {
  it('refuses what msgpackr refuses: headers cut short, lengths past the payload or short of it', () => {
    for (const bytes of [[0x92, 0x03, 0xc4], [0x92, 0x03, 0xd9], [0x92, 0x03, 0xc4, 0x02, 0x01], [0x92, 0x03, 0xa3, 0x61], [0x92, 0x03, 0xc4, 0x00, 0x00]]) {
      expect(() => decodePayload(Buffer.from(bytes)), Buffer.from(bytes).toString('hex')).toThrow(expect.objectContaining({ code: 'PROTOCOL_ERROR' }));
    }
    expect(decodePayload(Buffer.from([0x92, 0x03, 0xc4, 0x00]))).toEqual({ type: 'item', body: Buffer.alloc(0) });
    expect(decodePayload(Buffer.from([0x92, 0x03, 0xa0]))).toEqual({ type: 'item', body: '' });
  });
});
