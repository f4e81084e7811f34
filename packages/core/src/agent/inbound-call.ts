import { AgentError, toAgentError } from '../errors.js';
import type { Channel, ChannelStream } from '../channel.js';
import { FramedStream } from '../wire/framed-stream.js';
import type { WireMessage } from '../wire/messages.js';
import { deadlineTimer } from '../util/timer.js';
import { LazyAbort } from '../util/lazy-abort.js';
import type { CallContext, HandlerEntry, TunnelHandler } from './handlers.js';
import { InboundContext } from './inbound-context.js';

type Request = Extract<WireMessage, { type: 'request' }>;

export interface InboundDeps {
  maxFrameSize: number;
  handler(method: string): HandlerEntry | undefined;
}

/**
 * Serves one stream a peer opened: reads the request, runs the handler, writes the reply, and watches the
 * caller for cancellation while it runs. Never throws: every failure becomes an error frame or a reset.
 */
export async function serveInboundStream(stream: ChannelStream, channel: Channel, deps: InboundDeps): Promise<void> {
  const framed = new FramedStream(stream, deps.maxFrameSize);
  let first: WireMessage | undefined;
  try {
    first = await framed.receive();
  } catch (error) {
    stream.reset(toAgentError(error, 'PROTOCOL_ERROR'));
    return;
  }
  if (first?.type === 'ping') {
    await framed.send({ type: 'pong', nonce: first.nonce }).then(() => stream.end()).catch(() => undefined);
    return;
  }
  if (first?.type !== 'request') {
    stream.reset(new AgentError('PROTOCOL_ERROR', `a stream must start with a request, got ${first?.type ?? 'end of stream'}`));
    return;
  }
  await new InboundCall(framed, channel, first, deps).run();
}

class InboundCall {
  /** Why the call ended early; ctx.signal is made only when the handler reads it. */
  private readonly aborted = new LazyAbort();
  private timer: NodeJS.Timeout | undefined;
  private replied = false;
  private watching = false;

  constructor(
    private readonly framed: FramedStream,
    private readonly channel: Channel,
    private readonly request: Request,
    private readonly deps: InboundDeps,
  ) {}

  async run(): Promise<void> {
    const { request } = this;
    const entry = this.deps.handler(request.method);
    if (!entry) return this.replyError(new AgentError('NO_HANDLER', `no handler for "${request.method}"`));
    if (entry.kind === 'stream' && request.mode === 'unary') {
      return this.replyError(new AgentError('INVALID_ARGUMENT', `"${request.method}" streams: call it with agent.stream()`));
    }
    if ((entry.kind === 'tunnel') !== (request.mode === 'tunnel')) {
      const how = entry.kind === 'tunnel' ? 'agent.openTunnel()' : 'send() or stream()';
      return this.replyError(new AgentError('INVALID_ARGUMENT', `"${request.method}" is called with ${how}`));
    }
    const deadline = request.timeoutMs === null ? undefined : Date.now() + request.timeoutMs;
    // The reply travels at the caller's priority, where the transport can order streams.
    if (request.priority !== 'normal') this.framed.stream.setPriority?.(request.priority);
    const context = new InboundContext(this.channel.peer, this.channel.remoteAddress, request.method, this.aborted, deadline, request.priority, request.metadata);
    try {
      if (entry.kind === 'unary') {
        const result = entry.handler(request.body, context);
        // A handler that answered at once cannot be interrupted (nothing runs while it does): the deadline and
        // the caller's cancel matter only while a reply is pending, so they are armed only then.
        let body: unknown;
        if (isPromiseLike(result)) {
          this.armWatchers();
          body = await result;
          this.checkNotAborted();
        } else {
          body = result;
        }
        this.replied = true;
        await this.framed.send({ type: 'response', body });
        if (!this.watching) void this.watchCaller(); // reads the caller's end, which frees the stream
      } else {
        this.armWatchers(entry.kind !== 'tunnel'); // a tunnel's bytes are its handler's to read
        if (entry.kind === 'tunnel') return await this.openTunnel(entry.handler, context);
        await this.pump(entry.handler(request.body, context));
        this.replied = true;
        await this.framed.send({ type: 'end' });
      }
      await this.framed.stream.end();
    } catch (error) {
      if (this.aborted.reason) return; // the stream was reset when the call aborted
      const failure = error instanceof AgentError ? error : new AgentError('HANDLER_ERROR', errorMessage(error), { cause: error });
      await this.replyError(failure);
    } finally {
      clearTimeout(this.timer);
    }
  }

  /** The deadline timer, and (unless the handler owns the stream's bytes) the watch for the caller giving up. */
  private armWatchers(watchCaller = true): void {
    const { timeoutMs } = this.request;
    if (timeoutMs !== null) {
      this.timer = deadlineTimer(timeoutMs, () => this.abort(new AgentError('DEADLINE_EXCEEDED', `deadline of ${timeoutMs} ms exceeded`)));
    }
    if (watchCaller) void this.watchCaller();
  }

  /** Accepts a tunnel: the `response` frame, then the raw stream is the handler's. */
  private async openTunnel(handler: TunnelHandler, context: CallContext): Promise<void> {
    const { accept, onOpen } = await handler(this.request.body, context);
    this.checkNotAborted();
    clearTimeout(this.timer); // the deadline bounded the opening; the tunnel lives as long as its owner wants
    this.replied = true;
    await this.framed.send({ type: 'response', body: accept ?? null });
    if (!this.framed.drained) throw new AgentError('PROTOCOL_ERROR', 'caller sent bytes before the tunnel was accepted');
    onOpen(this.framed.stream);
  }

  /** Moves items from the handler's generator to the stream; each write waits for credit (backpressure). */
  private async pump(items: AsyncIterable<unknown>): Promise<void> {
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
          await this.framed.send({ type: 'item', body: next.value });
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

  /** After the request the caller sends nothing until it is done; anything else means it gave up. */
  private async watchCaller(): Promise<void> {
    this.watching = true;
    try {
      for (;;) {
        const message = await this.framed.receive();
        if (message === undefined) {
          if (!this.replied) this.abort(new AgentError('CANCELLED', 'caller ended the stream'));
          return;
        }
        if (message.type === 'cancel') {
          this.abort(new AgentError(message.code, message.message, { remote: true }));
          return;
        }
        this.abort(new AgentError('PROTOCOL_ERROR', `unexpected ${message.type} from the caller`));
        return;
      }
    } catch (error) {
      this.abort(toAgentError(error, 'CANCELLED'));
    }
  }

  private abort(reason: AgentError): void {
    if (!this.aborted.abort(reason)) return;
    clearTimeout(this.timer);
    this.framed.stream.reset(reason);
  }

  private checkNotAborted(): void {
    if (this.aborted.reason) throw this.aborted.reason;
  }

  private async replyError(error: AgentError): Promise<void> {
    try {
      await this.framed.send({ type: 'error', code: error.code, message: error.message });
      await this.framed.stream.end();
      // Refused before the handler ran, nothing read the caller's end yet: read it, so QUIC frees the stream.
      if (!this.watching) await this.framed.stream.read();
    } catch {
      this.framed.stream.reset(error);
    }
  }
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
