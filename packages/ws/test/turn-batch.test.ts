import { Duplex } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { BATCH_BYTES, TurnBatch } from '../src/turn-batch.js';

/** A socket stand-in that records each write it makes (a corked stream writes what it held when uncorked). */
function recordingSocket(): { socket: Duplex; writes: string[][] } {
  const writes: string[][] = [];
  const socket = new Duplex({
    read() {},
    writev(chunks, callback) {
      writes.push(chunks.map((c) => String(c.chunk)));
      callback();
    },
    write(chunk, _encoding, callback) {
      writes.push([String(chunk)]);
      callback();
    },
  });
  return { socket, writes };
}

/** What the pipe does per frame (web-socket-pipe.ts): before, the write, after. */
function send(batch: TurnBatch, socket: Duplex, frame: string, flushBefore = false, flushAfter = false): void {
  batch.before(flushBefore);
  socket.write(frame);
  batch.after(frame.length, flushAfter);
}

describe('TurnBatch', () => {
  it('frames of one turn leave together at its end', async () => {
    const { socket, writes } = recordingSocket();
    const batch = new TurnBatch(socket);
    send(batch, socket, 'a');
    send(batch, socket, 'b');
    expect(writes).toEqual([]);
    await new Promise((resolve) => process.nextTick(resolve));
    expect(writes).toEqual([['a', 'b']]);
  });

  it('a frame sent with flushAfter leaves in the same turn, with what was held before it; later frames are batched again', async () => {
    const { socket, writes } = recordingSocket();
    const batch = new TurnBatch(socket);
    send(batch, socket, 'unary');
    send(batch, socket, 'stream request', false, true);
    expect(writes).toEqual([['unary', 'stream request']]); // before the turn ends
    send(batch, socket, 'c');
    send(batch, socket, 'd');
    await new Promise((resolve) => process.nextTick(resolve));
    expect(writes.flat()).toEqual(['unary', 'stream request', 'c', 'd']);
    expect(writes).toHaveLength(2);
  });

  it("only a turn's first flushAfter frame leaves at once: 100 streamed calls started in one loop make two writes", async () => {
    const { socket, writes } = recordingSocket();
    const batch = new TurnBatch(socket);
    for (let i = 0; i < 100; i++) send(batch, socket, `request ${i}`, false, true);
    expect(writes).toEqual([['request 0']]);
    await new Promise((resolve) => process.nextTick(resolve));
    expect(writes).toHaveLength(2);
    expect(writes[1]).toHaveLength(99);
    // The next turn's first one leaves at once again.
    send(batch, socket, 'next turn', false, true);
    expect(writes).toHaveLength(3);
  });

  it('flushBefore sends what was held, and the batch budget bounds a burst', async () => {
    const { socket, writes } = recordingSocket();
    const batch = new TurnBatch(socket);
    send(batch, socket, 'first');
    send(batch, socket, 'second', true);
    expect(writes).toEqual([['first']]);
    send(batch, socket, 'x'.repeat(BATCH_BYTES));
    expect(writes.flat()).toEqual(['first', 'second', 'x'.repeat(BATCH_BYTES)]);
  });
});
