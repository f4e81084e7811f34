import { AgentError } from '@agentlink/core';
import { describe, expect, it } from 'vitest';
import type { NativeStream } from '../src/native.js';
import { QuicChannelStream } from '../src/quic-stream.js';

/**
 * An engine stream whose flow-control credit the test hands out: `tryWrite` takes what the credit allows, and
 * `write` (the wait for credit) settles only when the test says. What reached the wire is recorded in order.
 */
function creditedStream(credit: number) {
  const wire: Buffer[] = [];
  const waiting: Array<{ data: Buffer; done: () => void; fail: (error: Error) => void }> = [];
  const native: NativeStream = {
    tryWrite: (data) => {
      const taken = Math.min(credit, data.length);
      credit -= taken;
      if (taken > 0) wire.push(Buffer.from(data.subarray(0, taken)));
      return taken;
    },
    tryWriteFinish: (data) => native.tryWrite(data),
    write: (data) => new Promise<void>((resolve, reject) => waiting.push({ data: Buffer.from(data), done: resolve, fail: reject })),
    tryRead: () => null,
    read: () => new Promise(() => undefined),
    armRead: () => false,
    readOrArm: () => false,
    tryFinish: () => true,
    finish: async () => undefined,
    // As the engine does: a write waiting for credit fails with the local reset.
    reset: (code) => engineFails(`LOCAL_RESET|${code}`),
    cancel: () => true,
    setPriority: () => undefined,
    stopped: () => new Promise(() => undefined),
    stop: () => false,
    release: () => undefined,
  };
  const engineFails = (message: string): void => {
    for (let next = waiting.shift(); next; next = waiting.shift()) next.fail(new Error(message));
  };
  return {
    native,
    wire,
    waiting,
    /** The waiting writes fail in the engine (the peer stopped the stream, the connection went). */
    fail: engineFails,
    /**
     * Credit arrives. The engine's task for a waiting write has not run yet (it is spawned on the engine's own
     * thread), so for now the credit is free to whoever asks first.
     */
    grant(more: number): void {
      credit += more;
    },
    /** The engine's tasks run: waiting writes go out whole, in the order they were asked. */
    drain(): void {
      for (let next = waiting.shift(); next; next = waiting.shift()) {
        wire.push(next.data);
        next.done();
      }
    },
  };
}

describe('QUIC stream write order', () => {
  it('a large write only partly taken holds the writes after it, even when nobody awaits it', async () => {
    const engine = creditedStream(10_000);
    const stream = new QuicChannelStream(engine.native, () => undefined);
    const first = Buffer.alloc(20_000, 1); // larger than the cork limit: sent straight away, 10,000 bytes taken
    const second = Buffer.alloc(20_000, 2);
    const writing = stream.write(first);
    // Credit arrives while the first write's rest still waits in the engine: the second write must not take
    // it ahead of that rest.
    engine.grant(30_000);
    const writes = [writing, stream.write(second)];
    engine.drain();
    await writes[0];
    engine.drain();
    await Promise.all(writes);
    const sent = Buffer.concat(engine.wire);
    expect(sent.length).toBe(40_000);
    expect(sent.subarray(0, 20_000).every((byte) => byte === 1)).toBe(true);
    expect(sent.subarray(20_000).every((byte) => byte === 2)).toBe(true);
  });

  it('a small write after a waiting large one goes out after it', async () => {
    const engine = creditedStream(5_000);
    const stream = new QuicChannelStream(engine.native, () => undefined);
    const large = stream.write(Buffer.alloc(20_000, 1));
    engine.grant(1_000_000); // credit for everything arrives before the large write's rest has gone out
    const small = stream.write(Buffer.alloc(100, 2));
    await new Promise<void>((resolve) => process.nextTick(resolve)); // a corked small write leaves at the tick's end
    engine.drain();
    await Promise.all([large, small]);
    const sent = Buffer.concat(engine.wire);
    expect(sent.length).toBe(20_100);
    expect(sent.subarray(0, 20_000).every((byte) => byte === 1)).toBe(true);
    expect(sent.subarray(20_000).every((byte) => byte === 2)).toBe(true);
  });

  it('a reset while a write waits for credit fails it and every write held behind it, and the end, at once', async () => {
    const engine = creditedStream(5_000);
    const stream = new QuicChannelStream(engine.native, () => undefined);
    const outcome = (p: Promise<void>) => p.then(() => 'written', (e: AgentError) => e.message);
    const large = outcome(stream.write(Buffer.alloc(20_000, 1)));
    const held = outcome(stream.write(Buffer.alloc(20_000, 2)));
    const small = outcome(stream.write(Buffer.alloc(10, 3)));
    const ended = outcome(stream.end());
    stream.reset(new AgentError('CANCELLED', 'given up'));
    expect(await Promise.all([large, held, small, ended])).toEqual(['given up', 'given up', 'given up', 'given up']);
    expect(Buffer.concat(engine.wire).length).toBe(5_000); // nothing held went out after the reset
  });

  it("endWith's rest failing in the engine fails the end and the writes after it with that failure (none lost)", async () => {
    const engine = creditedStream(1_000);
    const stream = new QuicChannelStream(engine.native, () => undefined);
    const outcome = (p: Promise<void>) => p.then(() => 'written', (e: AgentError) => `${e.code} ${e.message}`);
    const last = outcome(stream.endWith(Buffer.alloc(20_000, 1)));
    const after = outcome(stream.write(Buffer.alloc(10, 2)));
    engine.fail('RESET|0');
    const [lastOutcome, afterOutcome] = await Promise.all([last, after]);
    expect(lastOutcome).toMatch(/stream reset by peer/);
    expect(afterOutcome).toBe(lastOutcome);
  });
});
