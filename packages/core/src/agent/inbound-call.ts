import { AgentError, toAgentError } from '../errors.js';
import type { Channel, ChannelStream } from '../channel.js';
import type { Refusal } from '../listener/refusal.js';
import { FramedStream, type MessageReceiver } from '../wire/framed-stream.js';
import { WRITTEN } from '../wire/written.js';
import type { CallMode, Priority, WireMessage } from '../wire/messages.js';
import { deadlineTimer } from '../util/timer.js';
import { LazyAbort } from '../util/lazy-abort.js';
import type { AgentId } from '../identity/agent-id.js';
import type { CallContext, HandlerEntry, TunnelHandler } from './handlers.js';
import type { ByteBudget } from './byte-budget.js';
import { InboundContext } from './inbound-context.js';
import { IncomingItems } from './inbound-duplex.js';
import { dispatchCatching, type CallControl, type CallHandler, type CallInfo, type Dispatch } from './interceptor.js';

type Request = Extract<WireMessage, { type: 'request' }>;

export interface InboundDeps {
  maxFrameSize: number;
  /** A stream's request must arrive whole within this, or the stream is reset. */
  requestTimeoutMs: number;
  handler(method: string): HandlerEntry | undefined;
  /** The channel's share of the agent's budget of unfinished inbound frames. */
  budget(channel: Channel): ByteBudget;
  /** The channel's share of the agent's budget of replies its peer does not read. */
  replyBudget(channel: Channel): ByteBudget;
  refused(refusal: Refusal): void;
  /**
   * A call arrived on `channel`: it is in use (idle close, a retired channel's quiet period). Not a ping: the
   * peer's health checks would keep every channel busy for ever (it pings each one every 30 s by default).
   */
  used(channel: Channel): void;
  /** The agent's inbound interceptors composed around `serveCall`; undefined when there are none. */
  dispatch: Dispatch | undefined;
}

/** The innermost inbound dispatch: runs the agent's handler for the call and reports its lifecycle. */
export const serveCall: Dispatch = (call, handler) => (call as InboundCall).serve(handler);

/** An inbound interceptor threw: the call fails as a throwing handler does (HANDLER_ERROR, or the AgentError thrown). */
export const failServedCall = (call: CallInfo, handler: CallHandler, error: unknown): void => (call as InboundCall).handlerFailed(error, handler);

/**
 * Serves one stream a peer opened: reads the request (within `requestTimeoutMs`), runs it through the inbound
 * interceptors and the handler, writes the reply, and watches the caller for cancellation while it runs. Never
 * throws: every failure becomes an error frame or a reset. A request that came with the stream's opening is
 * served from here with no promise (the mux's OPEN carries it); one still on its way is awaited in `serveLater`.
 */
export function serveInboundStream(stream: ChannelStream, channel: Channel, deps: InboundDeps): void {
  const budget = deps.budget(channel);
  if (budget.exhausted) {
    refuseStream(stream, channel, deps, 'budget', new AgentError('RESOURCE_EXHAUSTED', 'too many unfinished frames on this channel: stream refused'));
    return;
  }
  const framed = new FramedStream(stream, deps.maxFrameSize, budget, deps.replyBudget(channel));
  let first: WireMessage | undefined;
  try {
    // Usually the request came with the stream's opening (the mux's OPEN): taken at once, with no timer to arm.
    first = framed.receiveNow();
  } catch (error) {
    stream.reset(toAgentError(error, 'PROTOCOL_ERROR'));
    return;
  }
  if (first === undefined) void serveLater(framed, stream, channel, deps);
  else serveFirst(framed, first, channel, deps);
}

/** The request was not there with the stream's opening: wait for it (see `receiveRequest`), then serve it. */
async function serveLater(framed: FramedStream, stream: ChannelStream, channel: Channel, deps: InboundDeps): Promise<void> {
  let first: WireMessage | undefined;
  try {
    first = await receiveRequest(framed, stream, channel, deps);
  } catch (error) {
    stream.reset(toAgentError(error, 'PROTOCOL_ERROR'));
    return;
  }
  serveFirst(framed, first, channel, deps);
}

/** The stream's first message: a ping, or the request of a call. */
function serveFirst(framed: FramedStream, first: WireMessage | undefined, channel: Channel, deps: InboundDeps): void {
  const { stream } = framed;
  if (first?.type === 'ping') return void answerPing(framed, first.nonce);
  if (first?.type !== 'request') {
    stream.reset(new AgentError('PROTOCOL_ERROR', `a stream must start with a request, got ${first?.type ?? 'end of stream'}`));
    return;
  }
  deps.used(channel);
  const call = new InboundCall(framed, channel, first, deps);
  if (first.mode === 'tunnel' || !deps.dispatch) return call.serve(call.reply);
  // Interceptors may wait (rate limits): the caller's cancel and the deadline are watched from now on.
  call.armWatchers();
  // An interceptor that throws fails its call as a throwing handler does. Not further: this runs where the
  // transport hands over the stream (a WebSocket's message event), whose reader must not see our exceptions.
  dispatchCatching(deps.dispatch, call, call.reply, failServedCall);
}

/** Waits for the stream's request, within `requestTimeoutMs` (then the stream is refused and reset). */
async function receiveRequest(framed: FramedStream, stream: ChannelStream, channel: Channel, deps: InboundDeps): Promise<WireMessage | undefined> {
  const timer = setTimeout(() => {
    refuseStream(stream, channel, deps, 'request-timeout', new AgentError('DEADLINE_EXCEEDED', `request not complete within ${deps.requestTimeoutMs} ms`));
  }, deps.requestTimeoutMs);
  try {
    return await framed.receive();
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Pong, our end, then the caller's end: QUIC frees a stream only once both ends are read, so stopping at the pong
 * kept one stream per ping (every health check) counted and holding its credit. A caller that never ends holds
 * the stream like an unfinished call does, within the channel's stream limit.
 */
async function answerPing(framed: FramedStream, nonce: number): Promise<void> {
  try {
    await framed.send({ type: 'pong', nonce });
    await framed.stream.end();
    const after = await framed.receive();
    if (after !== undefined) framed.stream.reset(new AgentError('PROTOCOL_ERROR', `unexpected ${after.type} after a ping`));
  } catch (error) {
    framed.stream.reset(toAgentError(error, 'PROTOCOL_ERROR')); // frees it whatever failed
  }
}

function refuseStream(stream: ChannelStream, channel: Channel, deps: InboundDeps, reason: string, error: AgentError): void {
  deps.refused({ stage: 'stream', reason, kind: channel.kind, remoteAddress: channel.remoteAddress, peer: channel.peer, code: error.code });
  stream.reset(error);
}

/**
 * One call a peer made, as inbound interceptors see it (the same `CallInfo` outbound interceptors see, with the
 * caller as `peer`), and the terminal that runs the handler. `reply` writes what the handler produces.
 */
class InboundCall implements CallInfo, CallControl, MessageReceiver {
  readonly direction = 'inbound';
  readonly idempotent = false;
  readonly deadline: number | undefined;
  readonly reply: ReplyWriter;
  metadata: Readonly<Record<string, string>>;
  /** Why the call ended early; ctx.signal is made only when the handler reads it. */
  private readonly aborted = new LazyAbort();
  private timer: NodeJS.Timeout | undefined;
  /** The handler's `ctx`, told when the deadline stops applying (`endDeadline`). */
  private context: InboundContext | undefined;
  replied = false;
  private watching = false;
  /** The watch on the caller saw what ended it (see `watchCaller`). */
  private watchSettled = false;
  /** Duplex calls: the caller's items, read while the handler runs. */
  private readonly incoming: IncomingItems | undefined;

  constructor(
    readonly framed: FramedStream,
    private readonly channel: Channel,
    private readonly request: Request,
    private readonly deps: InboundDeps,
  ) {
    this.deadline = request.timeoutMs === null ? undefined : Date.now() + request.timeoutMs;
    this.metadata = request.metadata;
    this.reply = new ReplyWriter(this);
    if (request.mode === 'duplex') this.incoming = new IncomingItems(() => this.aborted.reason);
  }

  // ---- CallInfo ------------------------------------------------------------------------------------------

  get peer(): AgentId {
    return this.channel.peer;
  }

  get remoteAddress(): string {
    return this.channel.remoteAddress;
  }

  get method(): string {
    return this.request.method;
  }

  get body(): unknown {
    return this.request.body;
  }

  get mode(): CallMode {
    return this.request.mode;
  }

  get priority(): Priority {
    return this.request.priority;
  }

  get abortReason(): AgentError | undefined {
    return this.aborted.reason;
  }

  get signal(): AbortSignal {
    return this.aborted.signal;
  }

  remainingMs(): number | null {
    return this.deadline === undefined ? null : Math.max(0, this.deadline - Date.now());
  }

  /** Inbound, metadata set by an interceptor is what the handler sees in `ctx.metadata`. */
  setMetadata(key: string, value: string): void {
    this.metadata = { ...this.metadata, [key]: value };
  }

  abort(reason: AgentError): void {
    if (!this.aborted.abort(reason)) return;
    clearTimeout(this.timer);
    this.incoming?.fail(reason);
    this.framed.stream.reset(reason);
  }

  // ---- the terminal --------------------------------------------------------------------------------------

  /**
   * Runs the handler and reports its lifecycle to `out` (the reply writer, or the innermost interceptor). A unary
   * handler that answers at once is served with no promise of ours; one that returns a promise is awaited in
   * `awaitResult`, and streaming, duplex and tunnel handlers run in `serveAsync`.
   */
  serve(out: CallHandler): void {
    out.onStart?.(this);
    const { request } = this;
    const entry = this.deps.handler(request.method);
    if (!entry) return out.onError(new AgentError('NO_HANDLER', `no handler for "${request.method}"`));
    if (entry.kind === 'stream' && request.mode === 'unary') {
      return out.onError(new AgentError('INVALID_ARGUMENT', `"${request.method}" streams: call it with agent.stream()`));
    }
    if ((entry.kind === 'tunnel') !== (request.mode === 'tunnel') || (entry.kind === 'duplex') !== (request.mode === 'duplex')) {
      const how = entry.kind === 'tunnel' ? 'agent.openTunnel()' : entry.kind === 'duplex' ? 'agent.duplex()' : 'send() or stream()';
      return out.onError(new AgentError('INVALID_ARGUMENT', `"${request.method}" is called with ${how}`));
    }
    // The reply travels at the caller's priority, where the transport can order streams.
    if (request.priority !== 'normal') this.framed.stream.setPriority?.(request.priority);
    const context = new InboundContext(this.peer, this.remoteAddress, request.method, this.aborted, this.deadline, request.priority, this.metadata);
    this.context = context;
    if (entry.kind !== 'unary') return void this.serveAsync(entry, context, out);
    try {
      const result = entry.handler(request.body, context);
      // A handler that answered at once cannot be interrupted (nothing runs while it does): the deadline and the
      // caller's cancel matter only while a reply is pending, so they are armed only then.
      if (isPromiseLike(result)) {
        this.armWatchers();
        return void this.awaitResult(result, out);
      }
      out.onResponse?.(result);
      out.onEnd();
    } catch (error) {
      this.handlerFailed(error, out);
    }
  }

  /** A unary handler's promised result. */
  private async awaitResult(result: PromiseLike<unknown>, out: CallHandler): Promise<void> {
    try {
      const body = await result;
      this.checkNotAborted();
      out.onResponse?.(body);
      out.onEnd();
    } catch (error) {
      this.handlerFailed(error, out);
    }
  }

  /** Tunnel, duplex and streaming handlers. */
  private async serveAsync(entry: Exclude<HandlerEntry, { kind: 'unary' }>, context: CallContext, out: CallHandler): Promise<void> {
    const { request } = this;
    try {
      if (entry.kind === 'tunnel') {
        this.armWatchers(false); // a tunnel's bytes are its handler's to read
        await this.openTunnel(entry.handler, context);
      } else if (entry.kind === 'duplex') {
        this.armWatchers(); // reads the caller's items (and its cancel) from now on
        await this.pump(entry.handler(this.incoming!.iterate(), context), out);
        out.onEnd();
      } else {
        this.armWatchers();
        await this.pump(entry.handler(request.body, context), out);
        out.onEnd();
      }
    } catch (error) {
      this.handlerFailed(error, out);
    }
  }

  /** The handler (or an inbound interceptor) threw: the call fails with HANDLER_ERROR, or the AgentError thrown. */
  handlerFailed(error: unknown, out: CallHandler): void {
    out.onError(this.aborted.reason ?? (error instanceof AgentError ? error : new AgentError('HANDLER_ERROR', errorMessage(error), { cause: error })));
  }

  /** The deadline timer, and (unless the handler owns the stream's bytes) the watch for the caller giving up. */
  armWatchers(watchCaller = true): void {
    const { timeoutMs } = this.request;
    if (timeoutMs !== null && this.timer === undefined) {
      this.timer = deadlineTimer(timeoutMs, () => this.abort(new AgentError('DEADLINE_EXCEEDED', `deadline of ${timeoutMs} ms exceeded`)));
    }
    if (watchCaller && !this.watching) this.watchCaller();
  }

  /** The deadline no longer applies: its timer stops, and `ctx.signal` no longer brings it to calls made with it. */
  private endDeadline(): void {
    clearTimeout(this.timer);
    this.context?.deadlineEnded();
  }

  /** The call is over: its deadline no longer matters; a caller whose end we never read is read now. */
  finished(): void {
    this.endDeadline();
    this.incoming?.drop(); // the caller's items still on their way are read and discarded
    if (!this.watching) this.watchCaller(); // reads the caller's end, which frees the stream
  }

  /** Accepts a tunnel: the `response` frame, then the raw stream is the handler's. */
  private async openTunnel(handler: TunnelHandler, context: CallContext): Promise<void> {
    const { accept, onOpen } = await handler(this.request.body, context);
    this.checkNotAborted();
    this.endDeadline(); // the deadline bounded the opening; the tunnel lives as long as its owner wants
    this.replied = true;
    try {
      await this.framed.send({ type: 'response', body: accept ?? null });
      if (!this.framed.drained) throw new AgentError('PROTOCOL_ERROR', 'caller sent bytes before the tunnel was accepted');
    } catch (error) {
      // The handler accepted and holds what the tunnel needs (a relay's place, the far side's tunnel) until
      // `onOpen`, which now never comes: its signal is how it learns to let go.
      this.abort(toAgentError(error, 'UNAVAILABLE'));
      throw error;
    }
    onOpen(this.framed.stream);
  }

  /**
   * Moves items from the handler's generator to `out`; an item whose write must wait for credit holds the
   * generator until it went (backpressure). One that the writer took at once (`onItem` returned no promise)
   * costs no promise hop of its own.
   */
  private async pump(items: AsyncIterable<unknown>, out: CallHandler): Promise<void> {
    const iterator = items[Symbol.asyncIterator]();
    let done = false;
    try {
      for (;;) {
        const next = await iterator.next();
        if (next.done) {
          done = true;
          return;
        }
        this.checkNotAborted();
        try {
          const held = out.onItem?.(next.value);
          if (held) await held;
        } catch (error) {
          // The caller is gone (a reset can reach our write before our read): the handler must see why.
          if (error instanceof AgentError && error.remote) this.abort(error);
          throw error;
        }
      }
    } finally {
      // Runs the generator's `finally` when we stop early (cancel, deadline, write failure).
      if (!done) void Promise.resolve(iterator.return?.()).catch(() => undefined);
    }
  }

  /**
   * After the request the caller sends nothing until it is done; anything else means it gave up. Read push-style
   * where the stream offers it (`onMessage`): a unary call's caller end, already there once the reply went, is
   * taken at once, with no read loop or promise.
   */
  private watchCaller(): void {
    this.watching = true;
    if (this.incoming) void this.incoming.read(this.framed, this);
    else if (!this.framed.listen(this)) void this.readCaller();
  }

  /** `watchCaller` on a stream that cannot push: a read loop. */
  private async readCaller(): Promise<void> {
    try {
      for (;;) {
        const message = await this.framed.receive();
        if (this.callerSent(message)) return;
      }
    } catch (error) {
      this.onReadError(error);
    }
  }

  /** What the caller sent after its request: true once that settled the watch (it always does). */
  private callerSent(message: WireMessage | undefined): boolean {
    if (message === undefined) {
      if (this.replied) return true;
      if (this.framed.stream.peerEndsWithRequest && (this.request.mode === 'unary' || this.request.mode === 'stream')) {
        this.watchCallerStop();
        return true;
      }
      this.abort(new AgentError('CANCELLED', 'caller ended the stream'));
    } else if (message.type === 'cancel') {
      this.abort(new AgentError(message.code, message.message, { remote: true }));
    } else {
      this.abort(new AgentError('PROTOCOL_ERROR', `unexpected ${message.type} from the caller`));
    }
    return true;
  }

  /**
   * The caller ended its side with its request (ChannelStream.peerEndsWithRequest): that is no cancel. Its
   * cancel, if it comes, fails one more read (with its code); that read ends once our side did.
   */
  private watchCallerStop(): void {
    this.framed.stream.read().then(undefined, (error: unknown) => {
      if (!this.replied) this.abort(toAgentError(error, 'CANCELLED'));
    });
  }

  /** MessageReceiver (`watchCaller`, push-style): the first message settles the watch; later ones are dropped. */
  onMessage(message: WireMessage | undefined): void {
    if (this.watchSettled) return;
    this.watchSettled = true;
    this.callerSent(message);
  }

  /** MessageReceiver: the stream failed under the watch (reset, channel lost, a frame breaking the rules). */
  onReadError(error: unknown): void {
    if (this.watchSettled) return;
    this.watchSettled = true;
    this.abort(toAgentError(error, 'CANCELLED'));
  }

  private checkNotAborted(): void {
    if (this.aborted.reason) throw this.aborted.reason;
  }

  /** Sends the error as the call's reply; refused before the handler ran, it also reads the caller's end. */
  async replyError(error: AgentError): Promise<void> {
    this.endDeadline();
    this.incoming?.drop();
    if (this.aborted.reason) return; // the stream was reset when the call aborted
    this.replied = true; // a caller whose side ends with ours (endsWithPeer) has not cancelled
    try {
      await this.framed.sendLast({ type: 'error', code: error.code, message: error.message });
      // Nothing read the caller's end yet: read it, so QUIC frees the stream.
      if (!this.watching) await this.framed.stream.read();
    } catch {
      this.framed.stream.reset(error);
    }
  }
}

/**
 * The outermost handler of a served call: writes each event of the call's lifecycle to the caller as frames.
 * An item's write resolves once the transport took it within its credit: returned, it holds the producer.
 */
class ReplyWriter implements CallHandler {
  /**
   * A unary response waits for the call's end (which follows it at once), so both leave as one step: on the
   * mux one frame carrying the FIN flag instead of a response and a FIN. `undefined` is a valid body: `held`
   * says whether one waits.
   */
  private held = false;
  private heldBody: unknown;
  /**
   * The reply reported its end or failure: the call's outcome is decided. A later report (an inbound interceptor
   * that fails after passing the call on, e.g. an async one rejecting once the handler is done) is dropped: it
   * reset the finished stream before, and the caller lost the items it had not read yet.
   */
  private ended = false;

  constructor(private readonly call: InboundCall) {}

  onResponse(body: unknown): void {
    this.call.replied = true;
    this.held = true;
    this.heldBody = body;
  }

  onItem(item: unknown): Promise<void> | undefined {
    this.sendHeld();
    return this.call.framed.sendItem(item);
  }

  onEnd(): void {
    if (this.ended) return;
    this.ended = true;
    const { call } = this;
    call.replied = true;
    const message: WireMessage = this.held ? { type: 'response', body: this.heldBody } : { type: 'end' };
    this.held = false;
    this.heldBody = undefined;
    let sent: ReturnType<typeof call.framed.sendLast>;
    try {
      sent = call.framed.sendLast(message);
    } catch (error) {
      // The response cannot be encoded (a Date, a body past the frame limit): nothing was written, so the
      // caller gets that error as the reply rather than waiting for its deadline.
      void call.replyError(toAgentError(error, 'HANDLER_ERROR'));
      call.finished();
      return;
    }
    // A write the transport took at once cannot fail later: no handler (and no closure) for it.
    if (sent !== WRITTEN) {
      sent.catch((error: unknown) => {
        // The caller's reset failed the write: the call is aborted already, or the failure goes out as the reply.
        if (!call.abortReason) void call.replyError(toAgentError(error, 'UNAVAILABLE'));
      });
    }
    call.finished();
  }

  onError(error: AgentError): void {
    if (this.ended) return;
    this.ended = true;
    this.sendHeld();
    void this.call.replyError(error);
  }

  /** A response followed by something other than the end (an interceptor's doing) goes out first, in order. */
  private sendHeld(): void {
    if (!this.held) return;
    this.held = false;
    const body = this.heldBody;
    this.heldBody = undefined;
    let sent: Promise<void>;
    try {
      sent = this.call.framed.send({ type: 'response', body });
    } catch (error) {
      // The response cannot be encoded (a Date, past the frame limit): nothing was written. Before an error, that
      // error is the reply (it threw out of onError, which then sent nothing: the caller waited for its deadline);
      // before an item, the item's writer fails with it, and so the handler.
      if (this.ended) return;
      throw error;
    }
    sent.catch(() => undefined);
  }
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
