import { describe, expect, it } from 'vitest';
import { muxPair } from './recording-mux.js';
import { AgentError } from '../src/index.js';
import { ChunkQueue, encodeFrame, type ChannelStream, type ChunkSink, type WireMessage } from '../src/transport.js';
import { FramedStream, type MessageReceiver } from '../src/wire/framed-stream.js';
import { queueStream } from './queue-stream.js';

/** A sink that records what it was handed, in order. */
function recordingSink(): ChunkSink & { events: string[] } {
  const events: string[] = [];
  return {
    events,
    onChunk: (chunk) => void events.push(`chunk ${Buffer.from(chunk).toString()}`),
    onEnd: () => void events.push('end'),
    onError: (error) => void events.push(`error ${error.code}`),
  };
}

describe('ChunkQueue.listen (push-style reads)', () => {
  it('hands over what was queued at once, then each chunk as it is pushed, then the end; reads are refused meanwhile', async () => {
    const consumed: number[] = [];
    const queue = new ChunkQueue((bytes) => consumed.push(bytes));
    queue.push(Buffer.from('a'));
    queue.push(Buffer.from('bc'));
    const sink = recordingSink();
    queue.listen(sink);
    expect(sink.events).toEqual(['chunk a', 'chunk bc']);
    await expect(queue.read()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(queue.readNow()).toBeUndefined();
    queue.push(Buffer.from('def'));
    queue.end();
    expect(sink.events).toEqual(['chunk a', 'chunk bc', 'chunk def', 'end']);
    expect(consumed).toEqual([1, 2, 3]); // flow control learns of every byte handed over
    expect(queue.queuedBytes).toBe(0);
  });

  it('a queue already ended or failed tells a new listener so at once; a failure drops what is queued', () => {
    const ended = new ChunkQueue();
    ended.push(Buffer.from('x'));
    ended.end();
    const first = recordingSink();
    ended.listen(first);
    expect(first.events).toEqual(['chunk x', 'end']);

    const failed = new ChunkQueue();
    failed.push(Buffer.from('y'));
    failed.fail(new AgentError('CANCELLED', 'reset'));
    const second = recordingSink();
    failed.listen(second);
    expect(second.events).toEqual(['error CANCELLED']);
  });

  it('a failure while listening reaches the sink once, and nothing after it', () => {
    const queue = new ChunkQueue();
    const sink = recordingSink();
    queue.listen(sink);
    queue.fail(new AgentError('UNAVAILABLE', 'channel lost'));
    queue.push(Buffer.from('late'));
    queue.end();
    expect(sink.events).toEqual(['error UNAVAILABLE']);
  });
});


function recordingReceiver(): MessageReceiver & { messages: Array<WireMessage | undefined>; errors: unknown[] } {
  const messages: Array<WireMessage | undefined> = [];
  const errors: unknown[] = [];
  return { messages, errors, onMessage: (message) => void messages.push(message), onReadError: (error) => void errors.push(error) };
}

describe('FramedStream.listen', () => {
  it('decodes whole frames, frames split across chunks and several frames in one chunk, in order, then the end', () => {
    const queue = new ChunkQueue();
    const framed = new FramedStream(queueStream(queue), 1024 * 1024);
    const receiver = recordingReceiver();
    expect(framed.listen(receiver)).toBe(true);
    const response = encodeFrame({ type: 'response', body: Buffer.alloc(1024, 7) });
    queue.push(response); // one whole frame: decoded where it lies
    const split = encodeFrame({ type: 'item', body: 'split' });
    queue.push(split.subarray(0, 3));
    expect(receiver.messages).toHaveLength(1); // nothing for half a frame
    queue.push(Buffer.concat([split.subarray(3), encodeFrame({ type: 'item', body: 1 }), encodeFrame({ type: 'end' })]));
    queue.end();
    expect(receiver.messages).toEqual([
      { type: 'response', body: Buffer.alloc(1024, 7) },
      { type: 'item', body: 'split' },
      { type: 'item', body: 1 },
      { type: 'end' },
      undefined,
    ]);
    expect(receiver.errors).toEqual([]);
  });

  it('reports a stream that ends inside a frame as UNAVAILABLE, and a frame over the limit as FRAME_TOO_LARGE', () => {
    const cut = new ChunkQueue();
    const first = recordingReceiver();
    new FramedStream(queueStream(cut), 1024).listen(first);
    cut.push(encodeFrame({ type: 'item', body: 'cut short' }).subarray(0, 6));
    cut.end();
    expect(first.messages).toEqual([]);
    expect(first.errors).toEqual([expect.objectContaining({ code: 'UNAVAILABLE' })]);

    const large = new ChunkQueue();
    const second = recordingReceiver();
    new FramedStream(queueStream(large), 16).listen(second);
    large.push(encodeFrame({ type: 'item', body: 'x'.repeat(100) }));
    expect(second.messages).toEqual([]);
    expect(second.errors).toEqual([expect.objectContaining({ code: 'FRAME_TOO_LARGE' })]);
  });

  it('declines a stream that cannot push, so its reader falls back to receive', () => {
    const queue = new ChunkQueue();
    expect(new FramedStream(queueStream(queue, { push: false }), 1024).listen(recordingReceiver())).toBe(false);
  });
});

describe('a mux reply read push-style', () => {
  it('a reply whose frame carries the FIN ends the caller side before its listener runs: ending it then sends no FIN', async () => {
    const { a, accepted, fromA: sentByA } = muxPair();
    await new Promise((resolve) => setImmediate(resolve)); // both SETTINGS delivered
    const caller = a.openStreamNow({ endsWithPeer: true })!;
    await caller.write(Buffer.from('request'));
    while (accepted.length === 0) await new Promise((resolve) => setImmediate(resolve));
    const seen: string[] = [];
    const done = new Promise<void>((resolve) =>
      caller.listen!({
        onChunk: (chunk) => {
          seen.push(Buffer.from(chunk).toString());
          void caller.end(); // what a caller does on its reply, inside the pipe's callback
        },
        onEnd: () => {
          seen.push('end');
          resolve();
        },
        onError: (error) => seen.push(`error ${error.code}`),
      }),
    );
    const framesBefore = sentByA.length;
    await accepted[0]!.endWith!(Buffer.from('response'));
    await done;
    expect(seen).toEqual(['response', 'end']);
    expect(sentByA.length).toBe(framesBefore); // no FIN of the caller's crossed the pipe
    expect(a.activeStreams).toBe(0);
  });
});
