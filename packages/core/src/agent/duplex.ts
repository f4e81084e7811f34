import { AgentError } from '../errors.js';
import { StreamItems } from './call-results.js';
import type { DuplexOutbox } from './duplex-outbox.js';
import type { OutboundCall } from './outbound-call.js';

/**
 * A bidirectional call: the caller's writable side (`send`, `end`) and the handler's items as an async iterable.
 * Client streaming is `send` × n, `end()`, then one item read.
 */
export interface DuplexCall<In = unknown, Out = unknown> extends AsyncIterable<Out> {
  /**
   * Sends one item; resolves once the stream's flow-control window took it, so a handler that reads slowly
   * stalls the caller (backpressure). Rejects with the call's error once the call ended or failed.
   */
  send(item: In): Promise<void>;
  /** No more items from the caller (the handler's `for await` over its incoming items ends). */
  end(): Promise<void>;
  /**
   * Cancels the call on both sides: the handler's `ctx.signal` aborts and its incoming items fail with an
   * AgentError carrying `reason` (text: code CANCELLED; an AgentError keeps its code).
   */
  abort(reason?: string | AgentError): void;
  /** Why the call was aborted (caller's abort, signal, deadline, stopped reading), once it was. */
  readonly abortReason: AgentError | undefined;
}

/** The outermost handler of a duplex call: the handler's items for the reader; its end closes the writer too. */
export class DuplexReplies<Out> extends StreamItems<Out> {
  constructor(
    abortedBy: () => AgentError | undefined,
    private readonly outbox: DuplexOutbox,
    private readonly method: string,
  ) {
    super(abortedBy);
  }

  override onEnd(): void {
    this.outbox.close(new AgentError('CANCELLED', `${this.method}: the handler ended the call; nothing more can be sent`));
    super.onEnd();
  }

  override onError(error: AgentError): void {
    this.outbox.close(error);
    super.onError(error);
  }
}

export class DuplexSession<In, Out> implements DuplexCall<In, Out> {
  constructor(
    private readonly call: OutboundCall,
    private readonly items: DuplexReplies<Out>,
    private readonly outbox: DuplexOutbox,
  ) {}

  get abortReason(): AgentError | undefined {
    return this.call.abortReason;
  }

  send(item: In): Promise<void> {
    return this.outbox.send(item);
  }

  end(): Promise<void> {
    return this.outbox.end();
  }

  abort(reason: string | AgentError = 'caller aborted the call'): void {
    this.call.abort(reason instanceof AgentError ? reason : new AgentError('CANCELLED', reason));
    this.items.unhold();
  }

  /** Reads the handler's items; leaving the loop early cancels the call (as with `stream`). */
  [Symbol.asyncIterator](): AsyncGenerator<Out, void, undefined> {
    return this.items.iterate(() => this.abort(new AgentError('CANCELLED', 'caller stopped reading the duplex call')));
  }
}
