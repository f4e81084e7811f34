import { constants, type Http2Stream, type OutgoingHttpHeaders, type ServerHttp2Stream, type ServerStreamResponseOptions } from 'node:http2';
import { AgentError } from '@agentlink/core';
import { ChunkQueue, WRITTEN, type ChannelStream, type ChunkSink } from '@agentlink/core/transport';
import { afterScheduledSends, currentTurn } from './first-write-turn.js';
import type { OutboundBudget } from './outbound-budget.js';
import { fromGoawayCode, fromHttp2Code, http2CodeOf, isAgentlinkCode, isRetiredCode } from './reset-codes.js';
import { resetSoon } from './stream-reset.js';

/**
 * No `date` header on responses (node adds one unless told not to): nothing reads it, and each header costs
 * node:http2 work on both sides (the header list, HPACK, the receiver's header object). `respond()` reads
 * `sendDate` (its header processing, Node 20 and 24) though @types/node does not list it; without it a response
 * would only carry a date again (test/stream-writes.test.ts checks there is none).
 */
const RESPOND_OPTIONS = { sendDate: false } as ServerStreamResponseOptions;
/**
 * The largest piece handed to node at once. node buffers a written chunk whole, whatever the peer's window, and
 * says "wait" only after: so at most this much (plus node's 16 KiB high-water mark) waits in a stream's buffer.
 */
export const WRITE_SLICE = 64 * 1024;
/**
 * What one write costs beyond its bytes while node holds it (its WriteWrap, nghttp2's queue entry, our record):
 * ~200 B measured on Node 20, charged as 512 so that many tiny writes (streamed tokens) are bounded too.
 */
export const WRITE_OVERHEAD = 512;
/**
 * Bytes a stream lets node hold before its writer waits for 'drain' — ours, not node's high-water mark (16 KiB on
 * Node 20, 64 KiB from Node 22): core's item batches are 16 KiB and a little more, so with node's 16 KiB every
 * batch of a burst stalled its producer until node had sent it and called back. The session's OutboundBudget is
 * what bounds memory; this only paces one stream against node's buffer.
 */
export const STREAM_BUFFER_LIMIT = 64 * 1024;
/**
 * Bytes of a turn's writes a stream holds (corked) before it hands them to node and its writer waits for node's
 * send: one of core's item batches (16 KiB). See `writeInTurn`.
 */
export const TURN_SEND_BYTES = 16 * 1024;
/** Received bytes held before the stream is paused; pausing stops WINDOW_UPDATEs, which stops the sender. */
const READ_BUFFER_LIMIT = 1024 * 1024;

/**
 * node's stream finds its wrapper here. Its listeners are these shared functions (node calls them with `this` =
 * its stream), added once and never removed: each listener added to or removed from an HTTP/2 stream costs an
 * extra 'newListener'/'removeListener' emit, and per-stream closures or once() wrappers cost allocations. At
 * close the link is cut with one store, so nothing of the wrapper stays reachable from node's stream, which node
 * keeps a while after close (whatever it referenced then survived young-generation collections). Measured on
 * node:http2 alone: a 'close' listener that removed the 'data' one cost ~1 µs per side and round trip.
 */
const WRAPPER = Symbol('agentlink.http2.wrapper');
type LinkedStream = Http2Stream & { [WRAPPER]?: Http2ChannelStream | undefined };

function onNodeData(this: LinkedStream, chunk: Buffer): void {
  this[WRAPPER]?.onData(chunk);
}
function onNodeEnd(this: LinkedStream): void {
  this[WRAPPER]?.onEnd();
}
function confirmEnd(wrapper: Http2ChannelStream): void {
  wrapper.onEndConfirmed();
}
function uncorkAtEndOfTurn(wrapper: Http2ChannelStream): void {
  wrapper.endOfTurn();
}
function onNodeDrain(this: LinkedStream): void {
  this[WRAPPER]?.wakeWriters();
}
function onNodeClose(this: LinkedStream): void {
  const wrapper = this[WRAPPER];
  this[WRAPPER] = undefined;
  wrapper?.onClose();
}
/** 'close' follows an error, with the code. */
function ignoreError(): void {}

interface Waiter<T> {
  resolve(value: T): void;
  reject(error: AgentError): void;
}

/** An HTTP/2 stream (one request and its response, full duplex) as a ChannelStream. */
export class Http2ChannelStream implements ChannelStream {
  /** Paused above READ_BUFFER_LIMIT (no WINDOW_UPDATEs then: the sender waits), resumed below half of it. */
  private readonly incoming = new ChunkQueue(() => {
    if (this.stream.isPaused() && this.incoming.queuedBytes < READ_BUFFER_LIMIT / 2) this.stream.resume();
  });
  /** node emitted 'end'; the queue is ended one turn later, unless a reset follows (see onEnd). */
  private endSeen = false;
  /** Whether any byte came back: a stream refused before that was never processed by the peer. */
  private received = false;
  private failure: AgentError | undefined;
  private drainWaiters: Waiter<void>[] = [];
  /** The stream's session, kept because node unlinks it from the stream as the stream is destroyed. */
  private readonly session: Http2Stream['session'];
  /** Costs of the writes node has not reported sent yet, in order; they go back to the budget then. */
  private readonly unsent: number[] = [];
  /** Writes that went the slow way (sliced, or waiting for the session's budget) and are not all handed over. */
  private queued = 0;
  /** The last slow write: later writes wait for it, so bytes keep their order. Never rejects. */
  private tail: Promise<void> = WRITTEN;
  private budgetWaiter: (Waiter<void> & { wake(): void }) | undefined;
  /** The turn of the stream's first write (-1: none yet, -2: past it), see first-write-turn.ts. */
  private firstWriteTurn = -1;
  /** node's stream is corked until the end of this turn, or until it holds TURN_SEND_BYTES (see `writeInTurn`). */
  private corked = false;
  /** Bytes and writes held while corked. */
  private corkedBytes = 0;
  private corkedWrites = 0;
  /** A server stream sends these response HEADERS with its first bytes (set by the channel; a shared object). */
  respondWith: OutgoingHttpHeaders | undefined;

  constructor(
    private readonly stream: Http2Stream,
    /** The reason a stream ended without its own: the session's close or GOAWAY reason. */
    private readonly sessionFailure: () => AgentError,
    private readonly onDone: () => void,
    /** Bytes the session's streams may have in node's buffers, unsent (a zero-window peer holds them). */
    private readonly budget: OutboundBudget,
  ) {
    this.session = stream.session;
    (stream as LinkedStream)[WRAPPER] = this;
    stream.on('data', onNodeData);
    stream.on('end', onNodeEnd);
    stream.on('error', ignoreError);
    stream.on('close', onNodeClose);
  }

  write(chunk: Uint8Array): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.stream.destroyed || this.stream.writableEnded) return Promise.reject(new AgentError('CLOSED', 'write after end'));
    this.respondOnce();
    if (this.queued === 0 && chunk.length <= WRITE_SLICE && this.budget.tryTake(chunk.length + WRITE_OVERHEAD)) {
      if (this.firstWriteTurn === -2) return this.writeInTurn(chunk);
      if (!this.hand(chunk)) return this.waitForDrain();
      return this.yieldAfterFirstWrite();
    }
    this.queued++;
    const written = this.tail.then(() => this.writeSlowly(chunk));
    this.tail = written.then(this.unqueue, this.unqueue);
    return written;
  }

  /**
   * The stream's last bytes and its end in one step (a unary reply, a stream's final message): handed to node in
   * the call, with no promise between the write and the end, and no turn-counting (nothing follows on this
   * stream, so nothing waits for the first bytes to leave). node puts END_STREAM on the last DATA frame either way.
   */
  endWith(chunk: Uint8Array): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.stream.destroyed || this.stream.writableEnded) return Promise.reject(new AgentError('CLOSED', 'write after end'));
    if (this.queued > 0 || chunk.length > WRITE_SLICE || !this.budget.tryTake(chunk.length + WRITE_OVERHEAD)) {
      return this.write(chunk).then(() => this.end());
    }
    this.respondOnce();
    this.firstWriteTurn = -2;
    // Over node's high-water mark: end once it drained ('drain' is never emitted once a stream is ending).
    if (!this.hand(chunk)) return this.waitForDrain().then(() => this.end());
    this.stream.end();
    return WRITTEN;
  }

  end(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.queued > 0) return this.tail.then(() => this.end());
    this.respondOnce();
    if (!this.stream.writableEnded) this.stream.end();
    return WRITTEN;
  }

  read(): Promise<Uint8Array | undefined> {
    return this.incoming.read();
  }

  /**
   * Push-style reading (core reads a unary call's reply this way): node's 'data' hands each chunk on in its own
   * callback, no promise per chunk. The pause above READ_BUFFER_LIMIT never engages then: a chunk is consumed as
   * it arrives, and core's frame decoder bounds what it keeps.
   */
  listen(sink: ChunkSink): void {
    this.incoming.listen(sink);
  }

  reset(reason: AgentError): void {
    if (this.failure || this.stream.closed) return;
    this.fail(reason);
    resetSoon(this.stream, http2CodeOf(reason)); // never at once: see stream-reset.ts
  }

  /** Time to first token: a second write in the turn of the first lets node send the first (first-write-turn.ts). */
  private yieldAfterFirstWrite(): Promise<void> {
    if (this.firstWriteTurn === -1) {
      this.firstWriteTurn = currentTurn();
      return WRITTEN;
    }
    const sameTurn = this.firstWriteTurn === currentTurn();
    this.firstWriteTurn = -2;
    return sameTurn ? afterScheduledSends() : WRITTEN;
  }

  /**
   * A stream's writes after its first two (a burst's item batches, a duplex call's items, the reverse stream's mux
   * frames). node sends a session's frames from an immediate, after the turn that wrote them, and keeps one write
   * of a stream in flight, holding the later ones until nghttp2 has sent it. Two consequences for a producer that
   * never waits (1,000 tokens yielded in one turn), both measured (docs/performance-log.md, "HTTP/2 token bursts: a
   * batch on its way while the next is made"):
   * - its whole burst left at the end of its turn, so the caller worked through it only once the producer had
   *   made all of it: per token, the two sides' costs added up instead of overlapping;
   * - core's 16 KiB batch, written mid-turn, went out alone and the rest of the turn's writes (the last batch, the
   *   end) one socket write later, which the caller read only after it had worked through the first batch.
   * So node's stream is corked at a turn's first such write and handed the turn's writes as one (its `_writev`)
   * at the end of the turn, or as soon as they reach TURN_SEND_BYTES: then the writer waits one immediate, in
   * which node sends them (its send immediate runs first), and the caller starts on them while the producer makes
   * the next batch. A stream's end uncorks it (node's `end`): a last write and the end still go together.
   */
  private writeInTurn(chunk: Uint8Array): Promise<void> {
    if (!this.corked) {
      this.corked = true;
      this.stream.cork();
      process.nextTick(uncorkAtEndOfTurn, this);
    }
    this.corkedBytes += chunk.length;
    this.corkedWrites++;
    if (!this.hand(chunk)) {
      this.endOfTurn();
      return this.waitForDrain();
    }
    // Only while the peer keeps up: node has sent everything written before this turn. A peer whose window holds
    // our bytes gets them at the turn's end, as before (waiting a turn then would only spread a stalled stream's
    // writes: measured, 12 KiB more per call held for a zero-window peer).
    if (this.corkedBytes < TURN_SEND_BYTES || this.unsent.length > this.corkedWrites) return WRITTEN;
    this.endOfTurn();
    return afterScheduledSends();
  }

  /** @internal Hands node the writes held since the turn's first (see `writeInTurn`); nothing if none are. */
  endOfTurn(): void {
    if (!this.corked) return;
    this.corked = false;
    this.corkedBytes = 0;
    this.corkedWrites = 0;
    this.stream.uncork();
  }

  /**
   * Hands node bytes the budget granted; false when node holds STREAM_BUFFER_LIMIT or more of this stream's bytes
   * (node's own write() said so too then, which makes it emit 'drain' once they are sent).
   */
  private hand(piece: Uint8Array): boolean {
    this.unsent.push(piece.length + WRITE_OVERHEAD);
    const belowMark = this.stream.write(piece, this.onSent);
    return belowMark || this.stream.writableLength < STREAM_BUFFER_LIMIT;
  }

  /** node sent a write's bytes to the socket (or dropped them with the stream): they leave the budget. */
  private readonly onSent = (): void => {
    const bytes = this.unsent.shift();
    if (bytes !== undefined) this.budget.give(bytes);
  };

  private readonly unqueue = (): void => {
    this.queued--;
  };

  /** A chunk over WRITE_SLICE, or one the budget has no room for now: piece by piece, each within the budget. */
  private async writeSlowly(chunk: Uint8Array): Promise<void> {
    for (let offset = 0; offset < chunk.length; offset += WRITE_SLICE) {
      const piece = chunk.length <= WRITE_SLICE ? chunk : chunk.subarray(offset, offset + WRITE_SLICE);
      if (this.failure) throw this.failure;
      const cost = piece.length + WRITE_OVERHEAD;
      if (!this.budget.tryTake(cost)) await this.waitForBudget(cost);
      if (this.failure || this.stream.destroyed || this.stream.writableEnded) {
        this.budget.give(cost);
        throw this.failure ?? new AgentError('CLOSED', 'write after end');
      }
      if (!this.hand(piece)) await this.waitForDrain();
    }
  }

  private waitForDrain(): Promise<void> {
    if (this.drainWaiters.length === 0) this.stream.once('drain', onNodeDrain);
    return new Promise((resolve, reject) => this.drainWaiters.push({ resolve, reject }));
  }

  private waitForBudget(bytes: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const wake = (): void => {
        this.budgetWaiter = undefined;
        resolve();
      };
      this.budgetWaiter = { resolve, reject, wake };
      this.budget.waitFor(bytes, wake);
    });
  }

  private respondOnce(): void {
    const headers = this.respondWith;
    if (!headers) return;
    this.respondWith = undefined;
    const stream = this.stream as ServerHttp2Stream;
    if (!stream.headersSent && !stream.destroyed) stream.respond(headers, RESPOND_OPTIONS);
  }

  /** @internal node's 'data' (see WRAPPER). */
  onData(chunk: Buffer): void {
    this.received = true;
    this.incoming.push(chunk);
    if (this.incoming.queuedBytes >= READ_BUFFER_LIMIT) this.stream.pause();
  }

  /** @internal node's 'close': a peer's RST_STREAM is read from rstCode here (see WRAPPER). */
  onClose(): void {
    const code = this.stream.rstCode;
    if (code !== undefined && code !== 0) {
      this.failFromPeer(code);
    } else if (this.endSeen) {
      this.onEndConfirmed(); // closed cleanly: the end was real
    } else if (!this.failure) {
      this.fail(this.sessionFailure());
    }
    this.wakeWriters();
    // node drops what it had not sent: give it all back (callbacks that still come find nothing left).
    let unsent = 0;
    for (const bytes of this.unsent.splice(0)) unsent += bytes;
    if (unsent > 0) this.budget.give(unsent);
    this.onDone();
  }

  /** @internal node's 'end' (see WRAPPER). */
  onEnd(): void {
    this.endSeen = true;
    // node ends the readable side before it reports a peer's RST_STREAM ('aborted' follows in the same turn):
    // wait one turn, so a reset is never mistaken for a clean end.
    setImmediate(confirmEnd, this);
  }

  /** @internal */
  onEndConfirmed(): void {
    if (this.incoming.closed) return;
    const code = this.stream.rstCode;
    if (code !== undefined && code !== 0) return this.failFromPeer(code);
    this.incoming.end();
  }

  private failFromPeer(code: number): void {
    // The session of a retired channel closed (its GOAWAY and its streams' resets say so): what the peer did not
    // answer it never processed. The reverse stream's mux passes this on to its calls.
    if (isRetiredCode(code)) return this.fail(fromGoawayCode(code));
    // node closes every stream of a session that died under it (the socket broke: a killed peer, a keep-alive
    // unanswered) with a code of its own, INTERNAL_ERROR: no peer reset that, and the lost session is
    // UNAVAILABLE (retryable), never PROTOCOL_ERROR. Measured: every unary call waiting on a SIGKILLed peer.
    if (this.session?.destroyed && !isAgentlinkCode(code) && fromHttp2Code(code) === 'PROTOCOL_ERROR') {
      return this.fail(this.sessionFailure());
    }
    // Node servers refuse streams over their limit at HEADERS time (REFUSED_STREAM or ENHANCE_YOUR_CALM),
    // before any handler saw them.
    const refused = code === constants.NGHTTP2_REFUSED_STREAM || code === constants.NGHTTP2_ENHANCE_YOUR_CALM;
    if (code === constants.NGHTTP2_CANCEL || refused) {
      // node cancels (or refuses) the streams of a session the peer ended: a final reason of its GOAWAY (e.g.
      // PERMISSION_DENIED) says why; a retryable one keeps the retryable reading below.
      const session = this.sessionFailure();
      if (!session.retryable) return this.fail(session);
    }
    const errorCode = fromHttp2Code(code);
    const why = code === constants.NGHTTP2_CANCEL ? 'the HTTP/2 session ended under the stream' : `stream reset by peer (${errorCode})`;
    this.fail(new AgentError(refused ? 'UNAVAILABLE' : errorCode, why, { remote: true, unprocessed: refused && !this.received }));
  }

  private fail(reason: AgentError): void {
    if (this.failure) return;
    this.failure = reason;
    this.incoming.fail(reason);
    const budgetWaiter = this.budgetWaiter;
    if (budgetWaiter) {
      this.budgetWaiter = undefined;
      this.budget.cancel(budgetWaiter.wake);
      budgetWaiter.reject(reason);
    }
    const writers = this.drainWaiters;
    this.drainWaiters = [];
    for (const writer of writers) writer.reject(reason);
  }

  /** @internal Writes waiting for 'drain' go on, or fail with the stream. */
  wakeWriters(): void {
    const writers = this.drainWaiters;
    this.drainWaiters = [];
    for (const writer of writers) {
      if (this.failure) writer.reject(this.failure);
      else writer.resolve();
    }
  }
}
