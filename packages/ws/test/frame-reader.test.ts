import { once } from 'node:events';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as ws from 'ws';
import { FrameReader, readFramesFirst, type FrameReceiver } from '../src/frame-reader.js';
import { plainWsPair } from './plain-ws-pair.js';

// ws's own Receiver and Sender (exported by ws; @types/ws does not list them in this form).
interface WsSender {
  frame(data: Buffer, options: object): Buffer[];
}
type ReceiverClass = new (options: object) => FrameReceiver & { end(): void };
const Receiver = (ws as unknown as { Receiver: ReceiverClass }).Receiver;
const Sender = (ws as unknown as { Sender: WsSender }).Sender;

/** One frame as ws's Sender makes it. `key` undefined: unmasked; else the 4-byte mask key. */
function frame(opcode: number, payload: Buffer, fin: boolean, key: Buffer | undefined, rsv1 = false): Buffer {
  return Buffer.concat(
    Sender.frame(Buffer.from(payload), {
      fin,
      opcode,
      mask: key !== undefined,
      maskBuffer: Buffer.alloc(4),
      generateMask: (mask: Buffer) => key?.copy(mask),
      readOnly: false,
      rsv1,
    }),
  );
}

type Event = readonly [string, ...unknown[]];

/** What a receiver tells: messages, pings, pongs, a close, a refusal (ws's error code and its close status). */
function record(receiver: FrameReceiver, events: Event[], onStop: () => void): void {
  receiver.on('message', (data: Buffer, isBinary: boolean) => events.push(['message', Buffer.from(data).toString('hex'), isBinary]));
  receiver.on('ping', (data: Buffer) => events.push(['ping', data.toString('hex')]));
  receiver.on('pong', (data: Buffer) => events.push(['pong', data.toString('hex')]));
  receiver.on('conclude', (code: number, reason: Buffer) => {
    events.push(['conclude', code, reason.toString('hex')]);
    onStop();
  });
  receiver.on('error', (error: Error & { code?: string }) => {
    const status = Object.getOwnPropertySymbols(error).map((symbol) => (error as unknown as Record<symbol, unknown>)[symbol]);
    events.push(['error', error.code, ...status]);
    onStop();
  });
}

const RECEIVER_OPTIONS = { maxFragments: 4, allowSynchronousEvents: true, binaryType: 'nodebuffer' };

/** ws alone, fed the reads as ws's socket listener does (and no more after a close frame or a refusal). */
async function wsAlone(reads: Buffer[], isServer: boolean, maxPayload: number): Promise<Event[]> {
  const events: Event[] = [];
  const receiver = new Receiver({ ...RECEIVER_OPTIONS, isServer, maxPayload });
  let stopped = false;
  record(receiver, events, () => (stopped = true));
  for (const read of reads) {
    if (stopped) break;
    receiver.write(read);
  }
  await new Promise((resolve) => setImmediate(resolve)); // a refusal's 'error' comes a tick later
  return events;
}

/**
 * The reader in front of ws, fed the same reads. From `straightFrom` on, the reads go to ws's Receiver directly, as
 * ws does with a paused socket's last bytes when it closes (its `socketOnClose`, bypassing any 'data' listener).
 */
async function readerFirst(reads: Buffer[], isServer: boolean, maxPayload: number, straightFrom = Infinity): Promise<{ events: Event[]; framesRead: number }> {
  const events: Event[] = [];
  const receiver = new Receiver({ ...RECEIVER_OPTIONS, isServer, maxPayload });
  const reader = new FrameReader({
    isServer,
    maxPayload,
    receiver,
    // A view into the read: recorded at once, as the mux copies or decodes it before the callback returns.
    onMessage: (data) => events.push(['message', data.toString('hex'), true]),
    pause: () => undefined,
  });
  let stopped = false;
  record(receiver, events, () => {
    stopped = true;
    reader.stop();
  });
  reads.forEach((read, i) => {
    if (i < straightFrom) reader.push(read);
    else if (!stopped) receiver.write(read);
  });
  await new Promise((resolve) => setImmediate(resolve));
  return { events, framesRead: reader.framesRead };
}

/** A payload of a length near one of the header's boundaries (7-bit, 16-bit, 64-bit lengths). */
const payload = fc
  .oneof(fc.integer({ min: 0, max: 130 }), fc.integer({ min: 0xfff0, max: 0x1000f }), fc.constantFrom(0, 1, 125, 126, 127, 0xffff, 0x10000))
  .map((length) => Buffer.alloc(length, length & 0xff));

const controlPayload = fc.uint8Array({ maxLength: 125 }).map((bytes) => Buffer.from(bytes));

/** What a stream is made of: whole binary messages (the reader's), and everything the reader hands to ws. */
const part = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('binary' as const), payload }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('fragmented' as const), pieces: fc.array(payload, { minLength: 2, maxLength: 5 }), controls: fc.array(fc.tuple(fc.constantFrom(9, 10), controlPayload), { maxLength: 3 }), text: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('text' as const), text: fc.string({ maxLength: 40 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('control' as const), opcode: fc.constantFrom(9, 10), payload: controlPayload }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('bad' as const),
      what: fc.constantFrom('rsv1', 'rsv2', 'opcode3', 'opcode11', 'continuation', 'wrongMask', 'longPing', 'badCloseCode', 'close1Byte', 'unfinishedPing', 'new-data-mid-fragment', 'huge64'),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('close' as const), code: fc.constantFrom(1000, 1001, 1008, 3000, 4999), reason: fc.string({ maxLength: 20 }) }) },
);

function bytesOf(parts: Array<fc.Arbitrary<unknown> extends never ? never : ReturnType<typeof part.generate>['value']>, key: Buffer | undefined, wrongKey: Buffer | undefined): Buffer {
  const frames: Buffer[] = [];
  for (const p of parts) {
    switch (p.kind) {
      case 'binary':
        frames.push(frame(2, p.payload, true, key));
        break;
      case 'text':
        frames.push(frame(1, Buffer.from(p.text), true, key));
        break;
      case 'control':
        frames.push(frame(p.opcode, p.payload, true, key));
        break;
      case 'close':
        frames.push(frame(8, Buffer.concat([Buffer.from([p.code >> 8, p.code & 0xff]), Buffer.from(p.reason)]), true, key));
        break;
      case 'fragmented':
        p.pieces.forEach((piece, i) => {
          frames.push(frame(i === 0 ? (p.text ? 1 : 2) : 0, p.text ? Buffer.alloc(piece.length, 0x61) : piece, i === p.pieces.length - 1, key));
          const control = p.controls[i];
          if (control && i < p.pieces.length - 1) frames.push(frame(control[0], control[1], true, key));
        });
        break;
      case 'bad': {
        const one = Buffer.from([1, 2, 3]);
        if (p.what === 'rsv1') frames.push(frame(2, one, true, key, true));
        else if (p.what === 'rsv2') frames.push(orFirst(frame(2, one, true, key), 0x20));
        else if (p.what === 'opcode3') frames.push(frame(3, one, true, key));
        else if (p.what === 'opcode11') frames.push(frame(11, one, true, key));
        else if (p.what === 'continuation') frames.push(frame(0, one, true, key));
        else if (p.what === 'wrongMask') frames.push(frame(2, one, true, wrongKey));
        else if (p.what === 'longPing') frames.push(frame(9, Buffer.alloc(126), true, key));
        else if (p.what === 'badCloseCode') frames.push(frame(8, Buffer.from([0x03, 0xe7]), true, key));
        else if (p.what === 'close1Byte') frames.push(frame(8, Buffer.from([0x03]), true, key));
        else if (p.what === 'unfinishedPing') frames.push(frame(9, one, false, key));
        else if (p.what === 'new-data-mid-fragment') frames.push(frame(2, one, false, key), frame(2, one, true, key));
        // A 64-bit length past 2^53 − 1.
        else frames.push(Buffer.from([0x82, (key ? 0x80 : 0) | 127, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, ...(key ?? [])]));
        break;
      }
    }
  }
  return Buffer.concat(frames);
}

function orFirst(bytes: Buffer, bits: number): Buffer {
  bytes[0]! |= bits;
  return bytes;
}

/** Cuts `bytes` at the given points (fractions of its length): the reads of a socket. */
function cut(bytes: Buffer, points: number[]): Buffer[] {
  const at = [...new Set(points.map((p) => Math.floor(p * bytes.length)))].sort((a, b) => a - b);
  const reads: Buffer[] = [];
  let from = 0;
  for (const point of [...at, bytes.length]) {
    if (point > from) reads.push(bytes.subarray(from, point));
    from = point;
  }
  return reads;
}

describe('FrameReader in front of ws’s Receiver', () => {
  it('tells the same messages, pings, pongs, closes and refusals as ws alone, on ws’s own frames cut at any points (and with ws reading the last reads itself)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(part, { minLength: 1, maxLength: 8 }),
        // Server side: masked with the zero key (agentlink's clients) or a random one (others); client side: unmasked.
        fc.constantFrom('zero-key', 'random-key', 'unmasked'),
        fc.uint8Array({ minLength: 4, maxLength: 4 }),
        fc.constantFrom(200, 5 + 64 * 1024, 0x10000 + 100),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 12 }),
        fc.option(fc.nat({ max: 12 }), { nil: undefined }),
        async (parts, masking, randomKey, maxPayload, points, straightFrom) => {
          const isServer = masking !== 'unmasked';
          const key = masking === 'zero-key' ? Buffer.alloc(4) : masking === 'random-key' ? Buffer.from(randomKey) : undefined;
          // The wrong MASK bit for this side: unmasked at a server, masked at a client.
          const wrongKey = isServer ? undefined : Buffer.alloc(4);
          const bytes = bytesOf(parts, key, wrongKey);
          const reads = cut(bytes, points);
          const expected = await wsAlone(reads.map((read) => Buffer.from(read)), isServer, maxPayload);
          const got = await readerFirst(reads.map((read) => Buffer.from(read)), isServer, maxPayload, straightFrom);
          expect(got.events).toEqual(expected);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('reads whole binary frames itself and hands ws only the rest (zero key at a server, unmasked at a client)', async () => {
    for (const isServer of [true, false]) {
      const key = isServer ? Buffer.alloc(4) : undefined;
      const bytes = Buffer.concat([frame(2, Buffer.alloc(1029, 1), true, key), frame(9, Buffer.from('hi'), true, key), frame(2, Buffer.alloc(70_000, 2), true, key), frame(2, Buffer.alloc(3, 3), true, key)]);
      const got = await readerFirst([bytes], isServer, 5 + 64 * 1024 + 10_000);
      expect(got.events.map((event) => event[0])).toEqual(['message', 'ping', 'message', 'message']);
      expect(got.framesRead).toBe(3);
      // Over maxPayload: ws's verdict (1009), the reader takes nothing.
      const over = await readerFirst([frame(2, Buffer.alloc(300), true, key)], isServer, 200);
      expect(over.framesRead).toBe(0);
      expect(over.events).toEqual([['error', 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH', 1009]]);
    }
  });
});

describe('readFramesFirst on a real ws connection', () => {
  it('takes the frames of whole binary messages in the data callback; fragments, pings, text and the close handshake stay ws’s', async () => {
    const { socket, raw, client, close } = await plainWsPair({ allowSynchronousEvents: true });
    const messages: string[] = [];
    const reader = readFramesFirst(socket, raw, { isServer: true, maxPayload: 100_000, onMessage: (data) => messages.push(`own:${data.toString()}`) });
    expect(reader).toBeInstanceOf(FrameReader);
    socket.on('message', (data: Buffer, isBinary: boolean) => messages.push(`ws:${isBinary ? 'binary' : 'text'}:${data.toString()}`));
    const pong = once(client, 'pong');
    client.send(Buffer.from('one'));
    client.send(Buffer.from('tw'), { fin: false });
    client.ping(Buffer.from('between'));
    client.send(Buffer.from('o'), { fin: true });
    client.send('three');
    client.send(Buffer.from('four'));
    expect((await pong)[0].toString()).toBe('between'); // ws answered the ping it read
    const closed = once(client, 'close');
    client.close(4001, 'bye');
    const [code, reason] = (await closed) as [number, Buffer];
    expect([code, reason.toString()]).toEqual([4001, 'bye']); // the server answered the close handshake
    expect(messages).toEqual(['own:one', 'ws:binary:two', 'ws:text:three', 'own:four']);
    expect(reader!.framesRead).toBe(2);
    close();
  });
});
