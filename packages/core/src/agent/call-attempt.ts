import { AgentError, toAgentError } from '../errors.js';
import type { Channel } from '../channel.js';
import { FramedStream } from '../wire/framed-stream.js';
import type { WireMessage } from '../wire/messages.js';
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

/** One handler for the rejections nobody waits on (no closure per call). */
function ignore(): void {}

/** Calls refused unprocessed (HTTP/2 REFUSED_STREAM and the like) are resent at once, this many times. */
const MAX_TRANSPARENT_RETRIES = 5;

/** The innermost dispatch: one attempt of a call over the network. */
export function networkDispatch(deps: AttemptDeps): Dispatch {
  return (call: CallInfo, handler: CallHandler) => void new CallAttempt(deps, call, handler).run();
}

/**
 * One attempt: a slot on a channel (waiting by priority if all are busy), a stream, the request, and every
 * reply passed to the handler. Never throws: every failure reaches `handler.onError` exactly once.
 */
class CallAttempt implements CallControl {
  private channel: Channel | undefined;
  private framed: FramedStream | undefined;
  private readonly aborted = new LazyAbort();
  private settled = false;

  constructor(
    private readonly deps: AttemptDeps,
    private readonly call: CallInfo,
    private readonly handler: CallHandler,
  ) {}

  abort(reason: AgentError): void {
    if (this.settled || !this.aborted.abort(reason)) return;
    this.resetStream(reason);
  }

  async run(): Promise<void> {
    const { call, handler } = this;
    handler.onStart?.(this);
    for (let resend = 0; ; resend++) {
      try {
        const reason = this.aborted.reason ?? call.abortReason;
        if (reason) throw reason;
        await this.open();
        return await this.receiveReplies();
      } catch (error) {
        this.releaseSlot();
        // A call the peer refused before processing cannot have run: resend it on a fresh stream, within its deadline
        // (a duplex call only while none of its items went out: they are not kept for a resend).
        const resendable = error instanceof AgentError && error.unprocessed && !(call.mode === 'duplex' && outboxOf(call)?.bound);
        if (resendable && !this.aborted.reason && !call.abortReason && resend < MAX_TRANSPARENT_RETRIES) {
          this.framed = undefined;
          await new Promise((resolve) => setTimeout(resolve, resend));
          continue;
        }
        return this.fail(error);
      }
    }
  }

  private async open(): Promise<void> {
    const { call, deps } = this;
    this.channel = deps.pool.tryReserve(call.peer) ?? (await deps.pool.reserve(call.peer, call.priority, this.aborted.signal));
    // A unary or streamed call's caller sends nothing after its request but a cancel: its side may end with the
    // peer's (on the mux, no FIN of ours crosses the pipe).
    const endsWithPeer = call.mode === 'unary' || call.mode === 'stream';
    const stream = await this.channel.openStream({ priority: call.priority, idempotent: call.idempotent, endsWithPeer });
    deps.pool.touch(this.channel);
    this.framed = new FramedStream(stream, deps.maxFrameSize, deps.budget(this.channel));
    if (this.aborted.reason) this.resetStream(this.aborted.reason);
    await this.framed.send({
      type: 'request',
      method: call.method,
      timeoutMs: call.remainingMs(),
      priority: call.priority,
      metadata: call.metadata,
      body: call.body,
      mode: call.mode,
    });
    if (call.mode === 'duplex') {
      const outbox = outboxOf(call);
      if (!outbox) throw new AgentError('INVALID_ARGUMENT', `${call.method}: a duplex call is made with agent.duplex()`);
      outbox.attach(this.framed);
    }
  }

  private async receiveReplies(): Promise<void> {
    const framed = this.framed!;
    for (;;) {
      // Frames already decoded (a chunk carries a batch of items) are taken without a promise hop each.
      const message = framed.takeReady() ?? (await framed.receive());
      // Frames already decoded from one chunk keep coming after an abort: the caller must see none of them.
      const aborted = this.aborted.reason ?? this.call.abortReason;
      if (aborted) throw aborted;
      switch (message?.type) {
        case 'response':
          this.succeed();
          this.handler.onResponse?.(message.body);
          return this.handler.onEnd();
        case 'item':
          if (this.call.mode === 'unary') throw this.unexpected(message);
          {
            const held = this.handler.onItem?.(message.body, framed.lastFrameBytes);
            if (held) await held;
          }
          break;
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
      stream.end().catch(ignore);
      // The peer ends its side right after its last message; reading that end lets transports that track a
      // stream until both ends are seen (QUIC) release it now rather than at the channel's close.
      stream.read().catch(ignore);
    }
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
    // The cancel frame carries the reason's text; the reset carries its code even if the frame is dropped.
    framed.send({ type: 'cancel', code: reason.code, message: reason.message }).catch(() => undefined);
    framed.stream.reset(reason);
  }
}
