import { describe, expect, it } from 'vitest';
import { AgentError, Identity } from '../src/index.js';
import { MuxedChannel, resolveMuxOptions, type ChannelStream, type MuxOptions } from '../src/transport.js';
import { featuresTaking, largestBodyOf } from '../src/mux/mux-frame.js';
import { recordingMux } from './recording-mux.js';

/** Two multiplexers joined by an in-memory pipe that delivers asynchronously, like a socket. */
type PairOptions = MuxOptions;

/** `options` for both sides, or `listenerOptions` for the listener (b) when given. */
function pair(options: PairOptions = {}, listenerOptions: PairOptions = options) {
  const accepted: ChannelStream[] = [];
  const make = (role: 'dialer' | 'listener', deliver: (m: Uint8Array) => void, onClose: () => void) =>
    new MuxedChannel({
      ...(role === 'dialer' ? options : listenerOptions),
      kind: 'test',
      peer: Identity.generate().id,
      remoteAddress: 'memory',
      role,
      onStream: (stream) => accepted.push(stream),
      pipe: { send: (m) => deliver(Buffer.from(m)), bufferedAmount: 0, close: onClose },
    });
  const a: MuxedChannel = make('dialer', (m) => setImmediate(() => b.receive(m)), () => setImmediate(() => b.pipeClosed(new AgentError('UNAVAILABLE', 'gone'))));
  const b: MuxedChannel = make('listener', (m) => setImmediate(() => a.receive(m)), () => setImmediate(() => a.pipeClosed(new AgentError('UNAVAILABLE', 'gone'))));
  return { a, b, accepted };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

/** A peer's SETTINGS frame: its features (the stream-id field) and its per-stream window. */
function settingsFrame(features: number, window: number): Buffer {
  const frame = Buffer.alloc(9);
  frame[0] = 6;
  frame.writeUInt32BE(features, 1);
  frame.writeUInt32BE(window, 5);
  return frame;
}

describe('mux', () => {
  it('carries bytes both ways and half-closes each side independently', async () => {
    const { a, accepted } = pair();
    const stream = await a.openStream();
    await stream.write(Buffer.from('hello'));
    await stream.end();
    await tick();
    const remote = accepted[0]!;
    expect(Buffer.from((await remote.read())!).toString()).toBe('hello');
    expect(await remote.read()).toBeUndefined();
    await remote.write(Buffer.from('back'));
    await remote.end();
    expect(Buffer.from((await stream.read())!).toString()).toBe('back');
    expect(await stream.read()).toBeUndefined();
  });

  it('announces a stream with its first bytes, and not at all if it is reset before writing', async () => {
    const { channel, sent } = recordingMux();
    expect(sent.map((frame) => frame[0])).toEqual([6]); // SETTINGS: our window and features, first thing
    sent.length = 0;
    const quiet = await channel.openStream();
    quiet.reset(new AgentError('CANCELLED', 'never mind'));
    expect(sent).toEqual([]);
    const stream = await channel.openStream();
    await stream.write(Buffer.from('request'));
    expect(sent).toHaveLength(1);
    expect(sent[0]![0]).toBe(0); // OPEN, carrying the bytes
    expect(sent[0]!.subarray(5).toString()).toBe('request');
  });

  it('blocks a writer at the window until the reader consumes', async () => {
    const { a, accepted } = pair();
    const stream = await a.openStream();
    let written = false;
    const size = 3 * 256 * 1024;
    const write = stream.write(Buffer.alloc(size, 1)).then(() => (written = true));
    for (let i = 0; i < 10; i++) await tick();
    expect(written).toBe(false);
    const remote = accepted[0]!;
    let received = 0;
    while (received < size) received += (await remote.read())!.length;
    await write;
    expect(received).toBe(size);
  });

  it('each side announces a larger window (SETTINGS): a 4 MiB receiver gets 4 MiB in flight, a default one 256 KiB', async () => {
    const { a, b, accepted } = pair({ window: 4 * 1024 * 1024 }, {});
    await tick();
    // a (4 MiB window) opens a stream to b (default window): a may send 256 KiB; b may send 4 MiB back.
    const stream = await a.openStream();
    let sent = 0;
    void stream.write(Buffer.alloc(1024 * 1024)).then(() => (sent = 1024 * 1024));
    for (let i = 0; i < 10; i++) await tick();
    expect(sent).toBe(0); // held at b's 256 KiB
    const remote = accepted[0]!;
    let answered = false;
    void remote.write(Buffer.alloc(4 * 1024 * 1024 - 1)).then(() => (answered = true));
    for (let i = 0; i < 100 && !answered; i++) await tick();
    expect(answered).toBe(true); // within a's announced window, nothing read yet
    expect(b.isClosed).toBe(false);
  });

  it('a window below the initial 256 KiB is refused with INVALID_ARGUMENT', () => {
    expect(() => pair({ window: 1000 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });

  it('each limit option is checked: a value that is not a usable integer is refused with INVALID_ARGUMENT, naming it', () => {
    const invalid: Array<[keyof MuxOptions, number]> = [
      ['maxChunk', 0], // a write of pieces of no bytes looped forever, without yielding
      ['maxChunk', 1.5],
      ['maxChunk', Number.NaN],
      ['maxChunk', 16 * 1024 * 1024 + 1], // above what a peer can announce it takes: never sent
      ['maxInboundStreams', -1],
      ['highWaterMark', 0],
      ['maxUnsentBytes', Number.POSITIVE_INFINITY],
    ];
    for (const [name, value] of invalid) {
      expect(() => resolveMuxOptions({ [name]: value })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining(`mux.${name}`) }));
      expect(() => pair({ [name]: value })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    }
    expect(resolveMuxOptions({ maxChunk: 1, maxInboundStreams: 0 })).toMatchObject({ maxChunk: 1, maxInboundStreams: 0, window: 256 * 1024, maxUnsentBytes: 4 * 1024 * 1024 });
  });

  it('a reset reaches the peer with its code and fails local reads with the local reason', async () => {
    const { a, accepted } = pair();
    const stream = await a.openStream();
    await stream.write(Buffer.from('x'));
    await tick();
    const remote = accepted[0]!;
    await remote.read();
    const pending = remote.read();
    const local = stream.read();
    stream.reset(new AgentError('DEADLINE_EXCEEDED', 'too slow'));
    await expect(local).rejects.toMatchObject({ code: 'DEADLINE_EXCEEDED', message: 'too slow', remote: false });
    await expect(pending).rejects.toMatchObject({ code: 'DEADLINE_EXCEEDED', remote: true });
    await expect(remote.write(Buffer.from('y'))).rejects.toMatchObject({ code: 'DEADLINE_EXCEEDED' });
  });

  it('refuses streams beyond maxInboundStreams with RESOURCE_EXHAUSTED', async () => {
    const { a } = pair({ maxInboundStreams: 2 });
    const streams = await Promise.all([a.openStream(), a.openStream(), a.openStream()]);
    for (const stream of streams) await stream.write(Buffer.from('announce'));
    await expect(streams[2]!.read()).rejects.toMatchObject({ code: 'RESOURCE_EXHAUSTED' });
  });

  it('closes the channel with PROTOCOL_ERROR on malformed frames, failing open streams', async () => {
    for (const garbage of [Buffer.from([1, 2]), Buffer.from([9, 0, 0, 0, 1]), Buffer.from([2, 0, 0, 0, 1, 0]), Buffer.from([0, 0, 0, 0, 1])]) {
      const { a, b } = pair();
      const stream = await b.openStream();
      a.receive(garbage); // from the listener's point of view: stream 1 is dialer parity; 0 is invalid
      const reason = await a.closed;
      expect(reason.code).toBe('PROTOCOL_ERROR');
      await expect(stream.read()).rejects.toBeInstanceOf(AgentError);
    }
  });

  it("a peer's close reason (GOAWAY) reaches the other side's streams", async () => {
    const { a, b } = pair();
    const stream = await a.openStream();
    await tick();
    await b.close(new AgentError('CLOSED', 'shutting down for upgrade'));
    const reason = await a.closed;
    expect(reason.code).toBe('UNAVAILABLE');
    expect(reason.message).toContain('shutting down for upgrade');
    await expect(stream.read()).rejects.toMatchObject({ code: 'UNAVAILABLE' });
  });

  it('a peer overrunning the window gets its stream reset with PROTOCOL_ERROR', async () => {
    const { a, b, accepted } = pair();
    const stream = await a.openStream();
    await stream.write(Buffer.from('hi'));
    await tick();
    // Forge DATA frames past the 256 KiB window, as a misbehaving peer would.
    const data = Buffer.alloc(5 + 150 * 1024);
    data[0] = 1;
    data.writeUInt32BE(1, 1);
    b.receive(data);
    b.receive(data);
    await expect(accepted[0]!.read()).rejects.toMatchObject({ code: 'PROTOCOL_ERROR' });
    await expect(stream.read()).rejects.toMatchObject({ code: 'PROTOCOL_ERROR' });
  });

  it('a peer announcing 16 MiB gets no piece above our own maxChunk; SETTINGS between the pieces of one write re-cut the rest, whole frames', async () => {
    const sent: Buffer[] = [];
    const pipe = { send: (m: Uint8Array) => void sent.push(Buffer.from(m)), bufferedAmount: 0, close: () => undefined };
    const mux = new MuxedChannel({ kind: 'test', peer: Identity.generate().id, remoteAddress: 'memory', role: 'dialer', onStream: () => undefined, pipe, maxChunk: 256 * 1024, window: 8 * 1024 * 1024, highWaterMark: 64 * 1024 });
    const settings = (features: number) => mux.receive(settingsFrame(features, 8 * 1024 * 1024));
    const data = () => sent.splice(0).filter((f) => (f[0]! & 0x3f) <= 1);
    settings(featuresTaking(16 * 1024 * 1024));
    const stream = await mux.openStream();
    await stream.write(Buffer.alloc(1024 * 1024, 1));
    expect(data().map((f) => f.length - 5)).toEqual([256 * 1024, 256 * 1024, 256 * 1024, 256 * 1024]);

    // A pipe that fills: each piece of the next write waits for room, and the peer's SETTINGS change between them.
    pipe.send = (m: Uint8Array) => {
      sent.push(Buffer.from(m));
      pipe.bufferedAmount += m.length;
    };
    const payload = Buffer.from(Array.from({ length: 700 * 1024 }, (_, i) => i % 251));
    const written = stream.write(payload);
    for (const features of [featuresTaking(64 * 1024), featuresTaking(16 * 1024 * 1024), 1, featuresTaking(16 * 1024 * 1024)]) {
      settings(features);
      pipe.bufferedAmount = 0;
      mux.drained(); // room for one piece, cut by what is in force now
      await new Promise((resolve) => setImmediate(resolve));
    }
    await written;
    const pieces = data();
    // Every frame whole (header + body), each no larger than what was in force when it was cut, the bytes in order.
    expect(pieces.map((f) => f.length - 5)).toEqual([256 * 1024, 64 * 1024, 256 * 1024, 64 * 1024, 60 * 1024]);
    expect(pieces.every((f) => f.readUInt32BE(1) === pieces[0]!.readUInt32BE(1))).toBe(true);
    expect(Buffer.concat(pieces.map((f) => f.subarray(5))).equals(payload)).toBe(true);
  });

  it('sends pieces above 64 KiB only to a peer whose SETTINGS said it takes them, and no larger than it said', async () => {
    const sent: Buffer[] = [];
    const pipe = { send: (m: Uint8Array) => void sent.push(Buffer.from(m)), bufferedAmount: 0, close: () => undefined };
    const mux = new MuxedChannel({ kind: 'test', peer: Identity.generate().id, remoteAddress: 'memory', role: 'dialer', onStream: () => undefined, pipe, maxChunk: 1024 * 1024, largestBodyTaken: 300 * 1024, window: 4 * 1024 * 1024 });
    // Our SETTINGS: frame flags, and bodies up to 256 KiB (300 KiB rounded down to 64 KiB units).
    expect(sent[0]![0]).toBe(6);
    expect(largestBodyOf(sent[0]!.readUInt32BE(1))).toBe(256 * 1024);
    const bodies = () => sent.splice(0).filter((f) => (f[0]! & 0x3f) <= 1).map((f) => f.length - 5);
    const settings = (features: number) => mux.receive(settingsFrame(features, 4 * 1024 * 1024));
    const stream = await mux.openStream();
    // Before the peer's SETTINGS: the protocol's 64 KiB, which every peer takes.
    await stream.write(Buffer.alloc(200 * 1024));
    expect(Math.max(...bodies())).toBe(64 * 1024);
    // A peer that announces 128 KiB gets pieces of 128 KiB, never the 1 MiB we would send.
    settings(featuresTaking(128 * 1024));
    await stream.write(Buffer.alloc(300 * 1024));
    expect(Math.max(...bodies())).toBe(128 * 1024);
    // A peer from before the announcement (features 1, or 0) takes 64 KiB.
    settings(1);
    await stream.write(Buffer.alloc(200 * 1024));
    expect(Math.max(...bodies())).toBe(64 * 1024);
    expect(largestBodyOf(0)).toBe(64 * 1024);
    expect(largestBodyOf(featuresTaking(64 * 1024 - 1))).toBe(64 * 1024); // never below the protocol's
    expect(largestBodyOf(featuresTaking(2 ** 32))).toBe(16 * 1024 * 1024); // at most 256 units
    await mux.close();
  });

  it('a congested pipe takes waiting streams by priority as it drains: critical frames go out before low ones', async () => {
    const pipe = { sent: [] as Uint8Array[], bufferedAmount: 5000, send(m: Uint8Array) { this.sent.push(m); this.bufferedAmount += m.length; }, close() {} };
    const mux = new MuxedChannel({ kind: 'test', peer: Identity.generate().id, remoteAddress: 'memory', role: 'dialer', onStream: () => undefined, pipe, highWaterMark: 1000, maxChunk: 100 });
    pipe.sent.length = 0; // the SETTINGS every mux starts with
    const low = await mux.openStream({ priority: 'low' });
    const critical = await mux.openStream({ priority: 'critical' });
    const writes = [low.write(Buffer.alloc(500, 1)), critical.write(Buffer.alloc(500, 2))];
    await tick();
    expect(pipe.sent).toHaveLength(0); // congested: both wait
    pipe.bufferedAmount = 0;
    mux.drained();
    await tick();
    const ids = pipe.sent.map((frame) => Buffer.from(frame).readUInt32BE(1));
    expect(ids.slice(0, 5)).toEqual([3, 3, 3, 3, 3]); // the critical stream (id 3) was opened second but went first
    expect(ids).toContain(1);
    pipe.bufferedAmount = 0;
    mux.drained();
    await Promise.all(writes);
  });

  /**
   * A pipe like a socket: messages leave one at a time, in order, when the test says; the mux hears of a message
   * leaving only when it asked (`notifySent`), as the ws pipe's write callback is passed only then. `framing`:
   * bytes the pipe counts with each message beyond it (a WebSocket frame's header and mask key).
   */
  function socketLikePipe(framing = 0) {
    const queue: Array<{ bytes: number; notify: boolean }> = [];
    const pipe = {
      asked: [] as Array<boolean | undefined>,
      bufferedAmount: 0,
      mux: undefined as MuxedChannel | undefined,
      send(m: Uint8Array, _before?: boolean, _after?: boolean, notifySent?: boolean) {
        pipe.asked.push(notifySent);
        pipe.bufferedAmount += m.length + framing;
        queue.push({ bytes: m.length + framing, notify: notifySent === true });
      },
      close() {},
      /** The oldest message leaves; false when none is left. */
      leave(): boolean {
        const message = queue.shift();
        if (!message) return false;
        pipe.bufferedAmount -= message.bytes;
        if (message.notify) pipe.mux!.drained();
        return true;
      },
    };
    return pipe;
  }

  it('a frame into an idle pipe asks for no word that it left; writers behind a congested pipe still all finish', async () => {
    const pipe = socketLikePipe();
    const mux = (pipe.mux = new MuxedChannel({ kind: 'test', peer: Identity.generate().id, remoteAddress: 'memory', role: 'dialer', onStream: () => undefined, pipe, highWaterMark: 10_000, maxChunk: 100 }));
    while (pipe.leave()); // the SETTINGS every mux starts with
    pipe.asked.length = 0;
    const quiet = mux.openStreamNow()!;
    await quiet.write(Buffer.alloc(50));
    expect(pipe.asked).toEqual([false]); // a call one at a time: no write callback
    while (pipe.leave());

    // Several messages pile up past the high-water mark: all but the first were sent into a non-empty pipe.
    const many = mux.openStreamNow()!;
    let done = false;
    const writing = many.write(Buffer.alloc(15_000)).then(() => (done = true));
    // One message over the mark on its own: it asks, so the writer behind it is woken when it leaves.
    const big = new MuxedChannel({ kind: 'test', peer: Identity.generate().id, remoteAddress: 'memory', role: 'dialer', onStream: () => undefined, pipe: socketLikePipe(), highWaterMark: 50, maxChunk: 100 });
    const bigPipe = (big as unknown as { pipe: ReturnType<typeof socketLikePipe> }).pipe;
    bigPipe.mux = big;
    while (bigPipe.leave());
    const lone = big.openStreamNow()!;
    let bigDone = false;
    const bigWriting = lone.write(Buffer.alloc(150)).then(() => (bigDone = true));
    for (let turns = 0; turns < 400 && !(done && bigDone); turns++) {
      pipe.leave();
      bigPipe.leave();
      await tick();
    }
    expect([done, bigDone]).toEqual([true, true]);
    await Promise.all([writing, bigWriting]);
    expect(bigPipe.asked.at(-2)).toBe(true); // the first 100-byte piece, over the 50-byte mark
  });

  it("a frame alone in the pipe that reaches the mark only with the pipe's own framing asks, and wakes the writer behind it", async () => {
    const pipe = socketLikePipe(14); // at most what ws adds to a frame: a 10-byte header and a 4-byte mask key
    const mux = (pipe.mux = new MuxedChannel({ kind: 'test', peer: Identity.generate().id, remoteAddress: 'memory', role: 'dialer', onStream: () => undefined, pipe, highWaterMark: 5000, maxChunk: 5000 }));
    while (pipe.leave()); // the SETTINGS every mux starts with
    pipe.asked.length = 0;
    const stream = mux.openStreamNow()!;
    await stream.write(Buffer.alloc(4995)); // a frame of exactly the mark (5-byte header): the pipe holds 5014
    expect(mux.congested).toBe(true);
    expect(pipe.asked).toEqual([true]);
    let done = false;
    const writing = stream.write(Buffer.alloc(10)).then(() => (done = true));
    for (let turns = 0; turns < 10 && !done; turns++) {
      pipe.leave();
      await tick();
    }
    expect(done).toBe(true);
    await writing;
  });

  it('refuses streams past the limit, and closes a flooding peer that does not read instead of queueing refusals', async () => {
    const sent: Buffer[] = [];
    const refusals: string[] = [];
    let unsent = 0; // the peer never reads: every byte we send stays unsent
    let closedWith: AgentError | undefined;
    const channel = new MuxedChannel({
      kind: 'test',
      peer: Identity.generate().id,
      remoteAddress: 'memory',
      role: 'listener',
      maxInboundStreams: 4,
      highWaterMark: 64,
      onStream: () => undefined,
      onRefused: (refusal) => refusals.push(`${refusal.stage}:${refusal.reason}`),
      pipe: {
        send: (m) => {
          sent.push(Buffer.from(m));
          unsent += m.length;
        },
        get bufferedAmount() {
          return unsent;
        },
        close: (reason) => (closedWith = reason),
      },
    });
    const open = (id: number) => {
      const frame = Buffer.alloc(5);
      frame[0] = 0; // OPEN, no bytes
      frame.writeUInt32BE(id, 1);
      channel.receive(frame);
    };
    for (let i = 0; i < 4; i++) open(2 * i + 1);
    expect(channel.activeStreams).toBe(4);
    open(9); // past the limit, pipe not congested: a RESET goes out
    expect(sent.at(-1)![0]).toBe(4);
    expect(refusals).toEqual(['stream:max-streams']);
    // The flood goes on while our refusals sit unread: after the high-water mark, no more refusals are queued.
    for (let id = 11; id < 200_001; id += 2) open(id);
    expect(closedWith?.code).toBe('RESOURCE_EXHAUSTED');
    expect(channel.isClosed).toBe(true);
    expect(unsent).toBeLessThan(64 + 9 * 8);
    expect(refusals.at(-1)).toBe('stream:not-reading');
    expect((await channel.closed).code).toBe('RESOURCE_EXHAUSTED');
  });

  it('closes a channel whose control frames pile up unread past maxUnsentBytes', async () => {
    let unsent = 0;
    let closedWith: AgentError | undefined;
    const b = new MuxedChannel({
      kind: 'test',
      peer: Identity.generate().id,
      remoteAddress: 'memory',
      role: 'listener',
      highWaterMark: 16,
      maxUnsentBytes: 100,
      onStream: () => undefined,
      pipe: { send: (m) => void (unsent += m.length), get bufferedAmount() { return unsent; }, close: (reason) => (closedWith = reason) },
    });
    // Our side sends control frames (each stream's OPEN and FIN) while the peer reads nothing.
    const opened = await Promise.all(Array.from({ length: 40 }, () => b.openStream()));
    for (const stream of opened) await stream.end().catch(() => undefined);
    expect(closedWith?.code).toBe('RESOURCE_EXHAUSTED');
    expect(unsent).toBeLessThanOrEqual(100 + 20);
  });
});


/** Two multiplexers joined by a pipe with `delayMs` one way (in order), recording b's WINDOW grants. */
function slowPair(delayMs: number, options: { window?: number; maxWindow?: number; maxChannelWindowGrowth?: number } = {}) {
  const accepted: ChannelStream[] = [];
  const grantsByB: number[] = [];
  const make = (role: 'dialer' | 'listener', deliver: (m: Uint8Array) => void) =>
    new MuxedChannel({ ...options, kind: 'test', peer: Identity.generate().id, remoteAddress: 'memory', role, onStream: (s) => accepted.push(s), pipe: { send: (m) => deliver(Buffer.from(m)), bufferedAmount: 0, close: () => undefined } });
  const a: MuxedChannel = make('dialer', (m) => setTimeout(() => b.receive(m), delayMs));
  const b: MuxedChannel = make('listener', (m) => {
    if (m[0] === 2) grantsByB.push(Buffer.from(m).readUInt32BE(5));
    setTimeout(() => a.receive(m), delayMs);
  });
  return { a, b, accepted, grantsByB };
}

async function pushThrough(a: MuxedChannel, accepted: ChannelStream[], bytes: number, onRead?: () => Promise<void>): Promise<void> {
  const stream = await a.openStream();
  const written = stream.write(Buffer.alloc(bytes, 1)).then(() => stream.end());
  while (accepted.length === 0) await tick();
  const remote = accepted.shift()!;
  let received = 0;
  for (let chunk = await remote.read(); chunk; chunk = await remote.read()) {
    received += chunk.length;
    await onRead?.();
  }
  await written;
  expect(received).toBe(bytes);
}

describe('mux window auto-tuning', () => {
  it('a reader that keeps up with a long path grows its window past the initial 256 KiB, doubling per grant', async () => {
    const { a, accepted, grantsByB } = slowPair(5);
    await pushThrough(a, accepted, 2 * 1024 * 1024); // the first stream measures the round trip
    await pushThrough(a, accepted, 16 * 1024 * 1024);
    const largest = Math.max(...grantsByB);
    // A grant returns the consumed half window plus the growth: 128 KiB without growth, more once it doubled.
    expect(largest).toBeGreaterThan(1024 * 1024);
    expect(largest).toBeLessThanOrEqual(16 * 1024 * 1024);
  });

  it('a slow reader keeps the initial window: its grants return only what it consumed', async () => {
    const { a, accepted, grantsByB } = slowPair(1);
    // One 64 KiB chunk per 20 ms: half a window takes 40 ms, far more than two round trips of this 2 ms path.
    const slowly = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 20));
    await pushThrough(a, accepted, 1024 * 1024, slowly);
    await pushThrough(a, accepted, 1024 * 1024, slowly);
    expect(grantsByB.length).toBeGreaterThan(0);
    for (const grant of grantsByB) expect(grant).toBeLessThanOrEqual(256 * 1024);
  });

  it('growth stays within maxWindow per stream and maxChannelWindowGrowth per channel', async () => {
    const { a, accepted, grantsByB } = slowPair(5, { maxWindow: 1024 * 1024, maxChannelWindowGrowth: 512 * 1024 });
    await pushThrough(a, accepted, 2 * 1024 * 1024);
    await pushThrough(a, accepted, 8 * 1024 * 1024);
    // At most 256 KiB + 512 KiB of growth: a grant is at most half of 768 KiB consumed plus a growth step.
    const grownBy = grantsByB.reduce((sum, g) => sum + Math.max(0, g - 384 * 1024), 0);
    expect(Math.max(...grantsByB)).toBeLessThanOrEqual(384 * 1024 + 512 * 1024);
    expect(grownBy).toBeLessThanOrEqual(2 * 512 * 1024); // one growth budget per stream, released with the stream
  });

  it('maxWindow below window is refused with INVALID_ARGUMENT', () => {
    expect(() => slowPair(1, { window: 1024 * 1024, maxWindow: 512 * 1024 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => slowPair(1, { maxChannelWindowGrowth: -1 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});
