import { AgentError, toAgentError } from '../errors.js';
import type { Channel, ChannelStream, OpenStreamOptions } from '../channel.js';
import { FramedStream, type MessageReceiver } from '../wire/framed-stream.js';
import { WRITTEN } from '../wire/written.js';
import type { Priority, WireMessage } from '../wire/messages.js';
import { LazyAbort } from '../util/lazy-abort.js';
import type { ChannelPool } from './channel-pool.js';
import type { CallControl, CallHandler, CallInfo, Dispatch } from './interceptor.js';
import type { ByteBudget } from './byte-budget.js';
import { outboxOf } from './duplex-outbox.js';

export interface AttemptDeps {
  pool: ChannelPool;
  maxFrameSize: number;
  /** The channel's budget of unfinished inbound frames: a peer's replies count against it too. */
  budget(channel: Channel): ByteBudget;
}

/**
 * An attempt's stream options. Its `signal` is made only if the channel asks, i.e. when it must wait before it can
 * open the stream (HTTP/2 past the peer's limit, or before its SETTINGS): the call's abort (its deadline, its signal)
 * then ends that wait too. A class, for the getter on its prototype: an object literal with a getter took ~1.3 µs to
 * make against ~30 ns (measured, Node 20), V8 building such literals the slow way.
 */
class AttemptStreamOptions implements OpenStreamOptions {
  constructor(
    readonly priority: Priority,
    readonly idempotent: boolean,
    readonly endsWithPeer: boolean,
    readonly endsWithRequest: boolean,
    readonly firstWriteAtOnce: boolean,
    private readonly aborted: LazyAbort,
  ) {}

  get signal(): AbortSignal {
    return this.aborted.signal;
  }
}

/** One handler for the rejections nobody waits on (no closure per call). */
function ignore(): void {}

function resendLater(attempt: CallAttempt): void {
  attempt.resend();
}

/** Calls refused unprocessed (HTTP/2 REFUSED_STREAM and the like) are resent at once, this many times. */
export const MAX_TRANSPARENT_RETRIES = 5;

/** The innermost dispatch: one attempt of a call over the network. */
export function networkDispatch(deps: AttemptDeps): Dispatch {
  return (call: CallInfo, handler: CallHandler) => new CallAttempt(deps, call, handler).start();
}

/**
 * One attempt: a slot on a channel (waiting by priority if all are busy), a stream, the request, and every
 * reply passed to the handler. Never throws: every failure reaches `handler.onError` exactly once.
 */
class CallAttempt implements CallControl, MessageReceiver {
  private channel: Channel | undefined;
  private framed: FramedStream | undefined;
  private readonly aborted = new LazyAbort();
  private settled = false;
  /** The unary reply is awaited push-style (`FramedStream.listen`): messages and failures come to `onMessage`. */
  private listening = false;
  /** Transparent resends so far (see `failed`). */
  private resends = 0;
  /** A reply (an item) reached the handler: the call was processed, and is never resent (nor once part of a frame came). */
  private replied = false;

  constructor(
    private readonly deps: AttemptDeps,
    private readonly call: CallInfo,
    private readonly handler: CallHandler,
  ) {}

  abort(reason: AgentError): void {
    if (this.settled || !this.aborted.abort(reason)) return;
    this.resetStream(reason);
  }

  /** Starts the attempt; every outcome reaches the handler. */
  start(): void {
    this.handler.onStart?.(this);
    this.run();
  }

  /**
   * As far as the attempt gets without waiting, with no promise of its own: a unary call whose slot, stream and
   * request went at once ends here, listening for its reply (an async function per attempt cost a promise and
   * its hops on every call). Whatever must wait continues in `openThenReceive`.
   */
  private run(): void {
    try {
      const reason = this.aborted.reason ?? this.call.abortReason;
      if (reason) throw reason;
      const opening = this.open();
      if (opening) void this.openThenReceive(opening);
      else this.receive();
    } catch (error) {
      this.failed(error);
    }
  }

  private async openThenReceive(opening: Promise<void>): Promise<void> {
    try {
      await opening;
      this.receive();
    } catch (error) {
      this.failed(error);
    }
  }

  /**
   * A unary call's one reply is taken where its bytes arrive (push-style, where the stream offers it): no read
   * loop, no promise per reply. Streams read with `receive`, whose promises carry their backpressure. Listening
   * before `listen`: it hands over at once whatever already arrived (or the stream's failure).
   */
  private receive(): void {
    if (this.call.mode === 'unary') {
      this.listening = true;
      if (this.framed!.listen(this)) return;
      this.listening = false;
    }
    void this.receiveReplies();
  }

  /**
   * The attempt failed: a call the peer refused before processing cannot have run, so it is resent on a fresh
   * stream, within its deadline (a duplex call only while none of its items went out: they are not kept for a
   * resend); anything else is the call's error.
   */
  private failed(error: unknown): void {
    const { call } = this;
    this.releaseSlot();
    this.listening = false;
    // Part of a reply's frame here (a unary reply has no items) proves the call processed, as an item does.
    const replyBegan = this.replied || this.framed?.drained === false;
    const resendable = error instanceof AgentError && error.unprocessed && !replyBegan && !(call.mode === 'duplex' && outboxOf(call)?.bound);
    if (resendable && !this.aborted.reason && !call.abortReason && this.resends < MAX_TRANSPARENT_RETRIES) {
      this.framed = undefined;
      setTimeout(resendLater, this.resends++, this);
      return;
    }
    this.fail(error);
  }

  /** Runs the attempt again after a transparent resend's pause. */
  resend(): void {
    this.run();
  }

  /** MessageReceiver: the unary call's reply, read push-style (see `run`). */
  onMessage(message: WireMessage | undefined): void {
    if (!this.listening) return; // the end after the reply, or frames after a failure
    try {
      const aborted = this.aborted.reason ?? this.call.abortReason;
      if (aborted) throw aborted;
      this.endWithReply(message);
    } catch (error) {
      this.failed(error);
    }
  }

  /** MessageReceiver: the stream failed (reset, channel lost, a frame breaking the rules) before the reply. */
  onReadError(error: unknown): void {
    if (this.listening) this.failed(error);
  }

  /**
   * A slot, a stream and the request; undefined when all of it happened at once (a free slot, a channel that
   * opens streams without waiting, a request the transport took), else the promise of it.
   */
  private open(): Promise<void> | undefined {
    const { call, deps } = this;
    const channel = deps.pool.tryReserve(call.peer);
    if (!channel) return this.openLater();
    this.channel = channel;
    const stream = channel.openStreamNow?.(this.streamOptions());
    if (!stream) return this.openOn(channel);
    return this.sendRequest(channel, stream);
  }

  private async openLater(): Promise<void> {
    const { call, deps } = this;
    this.channel = await deps.pool.reserve(call.peer, call.priority, this.aborted.signal);
    await this.openOn(this.channel);
  }

  private async openOn(channel: Channel): Promise<void> {
    const stream = await channel.openStream(this.streamOptions());
    const sending = this.sendRequest(channel, stream);
    if (sending) await sending;
  }

  private streamOptions(): OpenStreamOptions {
    const { call } = this;
    // A unary or streamed call's caller sends nothing after its request but a cancel: its side may end with the
    // peer's (on the mux, no FIN of ours crosses the pipe).
    const endsWithPeer = call.mode === 'unary' || call.mode === 'stream';
    // A streamed call's request leaves at once (its caller waits for the first item, docs/architecture.md "A
    // stream's first token"); a unary call's shares the turn's write with the other calls of the turn.
    const firstWriteAtOnce = call.mode === 'stream' || call.mode === 'duplex';
    // A unary call's request may carry the caller's end (QUIC's agentlink/2); a cancel then has its code alone.
    const endsWithRequest = call.mode === 'unary';
    return new AttemptStreamOptions(call.priority, call.idempotent, endsWithPeer, endsWithRequest, firstWriteAtOnce, this.aborted);
  }

  /** Sends the request on the attempt's stream; undefined when the transport took it at once. */
  private sendRequest(channel: Channel, stream: ChannelStream): Promise<void> | undefined {
    const { call, deps } = this;
    // No pool.touch: the slot taken keeps the channel from idling and from eviction, and its release stamps the use.
    const framed = (this.framed = new FramedStream(stream, deps.maxFrameSize, deps.budget(channel)));
    if (this.aborted.reason) this.resetStream(this.aborted.reason);
    const request: WireMessage = {
      type: 'request',
      method: call.method,
      timeoutMs: call.remainingMs(),
      priority: call.priority,
      metadata: call.metadata,
      body: call.body,
      mode: call.mode,
    };
    // Where the transport ends our side with the request (QUIC's agentlink/2), the FIN leaves with it.
    const sent = stream.endsWithRequest ? framed.sendLast(request) : framed.send(request);
    if (call.mode === 'duplex') return this.attachOutbox(sent, framed);
    return sent === WRITTEN ? undefined : sent;
  }

  private async attachOutbox(sent: Promise<void>, framed: FramedStream): Promise<void> {
    await sent;
    const outbox = outboxOf(this.call);
    if (!outbox) throw new AgentError('INVALID_ARGUMENT', `${this.call.method}: a duplex call is made with agent.duplex()`);
    outbox.attach(framed);
  }

  /** The replies read in a loop (streams, and unary calls on streams that cannot push); never throws. */
  private async receiveReplies(): Promise<void> {
    const framed = this.framed!;
    try {
      for (;;) {
        // Frames already decoded (a chunk carries a batch of items) are taken without a promise hop each.
        const message = framed.takeReady() ?? (await framed.receive());
        // Frames already decoded from one chunk keep coming after an abort: the caller must see none of them.
        const aborted = this.aborted.reason ?? this.call.abortReason;
        if (aborted) throw aborted;
        if (message?.type !== 'item') return this.endWithReply(message);
        if (this.call.mode === 'unary') throw this.unexpected(message);
        this.replied = true;
        const held = this.handler.onItem?.(message.body, framed.lastFrameBytes);
        if (held) await held;
      }
    } catch (error) {
      this.failed(error);
    }
  }

  /** A message that ends the call, read either way: the response, a stream's end, or the peer's error. */
  private endWithReply(message: WireMessage | undefined): void {
    switch (message?.type) {
      case 'response':
        this.succeed();
        this.handler.onResponse?.(message.body);
        return this.handler.onEnd();
      case 'end':
        this.succeed();
        return this.handler.onEnd();
      case 'error':
        this.succeed(); // the call ended as the protocol says, with an error
        return this.finishWith(new AgentError(message.code, message.message, { remote: true }));
      default:
        throw this.unexpected(message);
    }
  }

  private unexpected(reply: WireMessage | undefined): AgentError {
    if (reply === undefined) return new AgentError('UNAVAILABLE', `${this.call.method}: peer ended the stream without a reply`);
    return new AgentError('PROTOCOL_ERROR', `${this.call.method}: unexpected ${reply.type} from the peer`);
  }

  /** The call ended as the protocol says: end our side of the stream and free the slot. */
  private succeed(): void {
    this.settled = true;
    const stream = this.framed?.stream;
    if (stream) {
      const ended = stream.end();
      if (ended !== WRITTEN) ended.catch(ignore);
      // The peer ends its side right after its last message; reading that end lets transports that track a
      // stream until both ends are seen (QUIC) release it now rather than at the channel's close. A reply read
      // push-style reads that end anyway.
      if (!this.listening) stream.read().catch(ignore);
    }
    this.listening = false;
    this.releaseSlot();
  }

  private fail(error: unknown): void {
    const failure = this.aborted.reason ?? this.call.abortReason ?? toAgentError(error, 'UNAVAILABLE');
    this.resetStream(failure);
    this.settled = true;
    this.finishWith(failure);
  }

  private finishWith(error: AgentError): void {
    this.handler.onError(error);
  }

  private releaseSlot(): void {
    if (this.channel) this.deps.pool.release(this.channel);
    this.channel = undefined;
  }

  private resetStream(reason: AgentError): void {
    const framed = this.framed;
    if (!framed || this.settled) return;
    // The cancel frame carries the reason's text; the reset carries its code even if the frame is dropped. A
    // stream whose side ended with its request has no room for the frame: the reset's code alone tells the peer.
    if (!framed.stream.endsWithRequest) framed.send({ type: 'cancel', code: reason.code, message: reason.message }).catch(() => undefined);
    framed.stream.reset(reason);
  }
}
