/**
 * What `ws`'s receive path costs per message, apart from the socket: the bytes an agentlink ws call's request or
 * reply arrives as (one binary message of a 5-byte mux header and a 1 KB body, masked with the zero key as agentlink's
 * client sends it, or unmasked as its server does), made by `ws`'s own `Sender.frame`, fed one TLS read at a time to
 * (a) `ws`'s `Receiver` (a Writable stream: `write` → `_write` → its parsing loop → 'message'), followed by the hop
 * `ws`'s WebSocket adds (`receiverOnMessage` re-emits 'message' on the WebSocket), as `socket.on('data')` does in `ws`;
 * (b) the least a frame reader in the data callback does for the same bytes: check the first two bytes (FIN,
 * RSV, opcode, MASK), read the length, check the zero key, hand a view of the payload on (no partial frames, no
 * control frames: the fast path only, a lower bound); and (c) packages/ws's FrameReader, with a Receiver behind it
 * for what it does not take, as the channel uses it.
 *
 * Prints ns per message (CPU, a tight loop, the median of interleaved rounds) and bytes allocated per message
 * (young-generation bytes used across a batch that triggered no collection).
 * Usage: node --import tsx src/ws-receive-cost.ts [--rounds 9] [--messages 200000]
 */
import { EventEmitter } from 'node:events';
import { PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { getHeapSpaceStatistics } from 'node:v8';
import * as ws from 'ws';
import { FrameReader } from '../../packages/ws/src/frame-reader.js';
import { median } from './median.js';

// The Receiver and Sender classes ws's WebSocket uses (exported by ws, not typed by @types/ws in this form).
const Receiver = (ws as unknown as { Receiver: new (options: object) => EventEmitter & { write(chunk: Buffer): boolean } }).Receiver;
const Sender = (ws as unknown as { Sender: { frame(data: Buffer, options: object): Buffer[] } }).Sender;

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '9' }, messages: { type: 'string', default: '200000' } } });
const ROUNDS = Number(args.rounds);
const MESSAGES = Number(args.messages);
const MAX_PAYLOAD = 5 + 64 * 1024;

function frameOf(masked: boolean): Buffer {
  const payload = Buffer.alloc(5 + 1024, 7);
  const parts = Sender.frame(payload, {
    fin: true,
    opcode: 2,
    mask: masked,
    maskBuffer: Buffer.alloc(4),
    generateMask: (mask: Buffer) => mask.fill(0),
    readOnly: false,
    rsv1: false,
  });
  return Buffer.concat(parts);
}

let received = 0;
const sink = (data: Buffer): void => {
  received += data.length;
};

/** `ws`'s path: the Receiver, then the WebSocket's re-emit, as `socketOnData` → `receiver.write` does. */
function wsReader(isServer: boolean): (chunk: Buffer) => void {
  const receiver = new Receiver({ isServer, maxPayload: MAX_PAYLOAD, maxFragments: 1024, binaryType: 'nodebuffer' });
  const webSocket = new EventEmitter();
  webSocket.on('message', (data: Buffer, isBinary: boolean) => {
    if (isBinary) sink(data);
  });
  receiver.on('message', (data: Buffer, isBinary: boolean) => webSocket.emit('message', data, isBinary));
  receiver.on('error', (error) => {
    throw error;
  });
  return (chunk) => void receiver.write(chunk);
}

/** The least a reader of our own does for a whole frame in one read (the fast path only). */
function ownReader(isServer: boolean): (chunk: Buffer) => void {
  return (chunk) => {
    const b0 = chunk[0]!;
    const b1 = chunk[1]!;
    if (b0 !== 0x82 || (b1 & 0x80) !== (isServer ? 0x80 : 0)) throw new Error('not the fast path');
    let length = b1 & 0x7f;
    let offset = 2;
    if (length === 126) {
      length = (chunk[2]! << 8) | chunk[3]!;
      offset = 4;
    } else if (length === 127) throw new Error('not the fast path');
    if (length > MAX_PAYLOAD) throw new Error('too large');
    if (isServer) {
      if ((chunk[offset]! | chunk[offset + 1]! | chunk[offset + 2]! | chunk[offset + 3]!) !== 0) throw new Error('not the zero key');
      offset += 4;
    }
    if (chunk.length !== offset + length) throw new Error('not one frame');
    sink(chunk.subarray(offset, offset + length));
  };
}

/** packages/ws's FrameReader in front of ws's Receiver (which gets nothing here: every frame is the reader's). */
function frameReader(isServer: boolean): (chunk: Buffer) => void {
  const receiver = new Receiver({ isServer, maxPayload: MAX_PAYLOAD, maxFragments: 1024, binaryType: 'nodebuffer' }) as EventEmitter & { write(chunk: Buffer): boolean; errored: Error | null };
  const reader = new FrameReader({ isServer, maxPayload: MAX_PAYLOAD, receiver, onMessage: sink, pause: () => undefined });
  return (chunk) => reader.push(chunk);
}

let collections = 0;
new PerformanceObserver((list) => void (collections += list.getEntries().length)).observe({ entryTypes: ['gc'] });
const newSpaceUsed = (): number => getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')!.space_used_size;

/** Bytes allocated per message: young-generation growth over small batches in which no collection ran. */
async function bytesPerMessage(read: (chunk: Buffer) => void, frame: Buffer): Promise<number> {
  const samples: number[] = [];
  const batch = 200;
  while (samples.length < 20) {
    // Let the gc observer's entries of earlier batches arrive first.
    await new Promise((resolve) => setImmediate(resolve));
    const before = collections;
    const used = newSpaceUsed();
    for (let i = 0; i < batch; i++) read(frame);
    const grown = newSpaceUsed() - used;
    await new Promise((resolve) => setImmediate(resolve));
    if (collections === before && grown > 0) samples.push(grown / batch);
  }
  return median(samples);
}

function nsPerMessage(read: (chunk: Buffer) => void, frame: Buffer): number {
  const cpu = process.cpuUsage();
  for (let i = 0; i < MESSAGES; i++) read(frame);
  const used = process.cpuUsage(cpu);
  return ((used.user + used.system) * 1000) / MESSAGES;
}

const subjects = [
  { name: "ws Receiver + WebSocket emit, server side (masked, zero key)", read: wsReader(true), frame: frameOf(true) },
  { name: 'least reader, server side (masked, zero key)', read: ownReader(true), frame: frameOf(true) },
  { name: 'FrameReader, server side (masked, zero key)', read: frameReader(true), frame: frameOf(true) },
  { name: "ws Receiver + WebSocket emit, client side (unmasked)", read: wsReader(false), frame: frameOf(false) },
  { name: 'least reader, client side (unmasked)', read: ownReader(false), frame: frameOf(false) },
  { name: 'FrameReader, client side (unmasked)', read: frameReader(false), frame: frameOf(false) },
].map((subject) => ({ ...subject, ns: [] as number[], bytes: 0 }));

for (const subject of subjects) nsPerMessage(subject.read, subject.frame); // warm-up
for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < subjects.length; i++) {
    const subject = subjects[(round + i) % subjects.length]!;
    subject.ns.push(nsPerMessage(subject.read, subject.frame));
  }
}
for (const subject of subjects) subject.bytes = await bytesPerMessage(subject.read, subject.frame);
console.log(`node ${process.version}: ${ROUNDS} interleaved rounds of ${MESSAGES.toLocaleString('en')} messages of 1,029 bytes, one frame per read; median (range)`);
console.log('| reader | CPU ns per message | bytes allocated per message |\n|---|---|---|');
for (const subject of subjects) {
  console.log(`| ${subject.name} | ${median(subject.ns).toFixed(0)} (${Math.min(...subject.ns).toFixed(0)}–${Math.max(...subject.ns).toFixed(0)}) | ${subject.bytes.toFixed(0)} |`);
}
if (received === 0) throw new Error('nothing read');
