import { AgentError } from '../errors.js';
import type { FramedStream } from '../wire/framed-stream.js';
import type { CallInfo } from './interceptor.js';

/**
 * The caller's side of a duplex call: its items, written in order to the stream of the attempt that carries the
 * call. `send` resolves once the transport took the item within the stream's flow-control window, so a handler
 * that does not read stalls the caller (backpressure). Items wait for the request to be on the wire; once one
 * went out the call cannot move to another stream (a resend would lose it), so a second attempt is refused.
 */
export class DuplexOutbox {
  private framed: FramedStream | undefined;
  private opened!: () => void;
  private readonly ready = new Promise<void>((resolve) => (this.opened = resolve));
  /** The last write: each write starts after the one before it, so a large item's two segments stay together. */
  private tail: Promise<void> = Promise.resolve();
  private committed = false;
  private ended = false;
  private closedWith: AgentError | undefined;

  constructor(private readonly call: CallInfo) {}

  /** True once an item or the end went out: the call is bound to its stream. */
  get bound(): boolean {
    return this.committed;
  }

  /** The attempt wrote the request on `framed`: queued items follow it. */
  attach(framed: FramedStream): void {
    if (this.committed) {
      throw new AgentError('UNAVAILABLE', `${this.call.method}: the duplex stream was lost after items were sent; they cannot be resent`);
    }
    this.framed = framed;
    this.opened();
  }

  send(item: unknown): Promise<void> {
    if (this.ended) return Promise.reject(new AgentError('INVALID_ARGUMENT', `${this.call.method}: send() after end()`));
    return this.write({ type: 'item', body: item });
  }

  end(): Promise<void> {
    if (this.ended) return this.tail;
    this.ended = true;
    return this.write({ type: 'end' });
  }

  /** The call is over (its reply ended or failed): queued and later writes reject with `reason`. */
  close(reason: AgentError): void {
    this.closedWith ??= reason;
    this.opened();
  }

  private write(message: { type: 'item'; body: unknown } | { type: 'end' }): Promise<void> {
    const written = this.tail.then(async () => {
      await this.ready;
      this.checkOpen();
      this.committed = true;
      try {
        await this.framed!.send(message);
      } catch (error) {
        // A reset failed the write: the caller learns why the call ended, not the transport's view of it.
        this.checkOpen();
        throw error;
      }
    });
    this.tail = written.catch(() => undefined);
    return written;
  }

  private checkOpen(): void {
    const reason = this.call.abortReason ?? this.closedWith;
    if (reason) throw reason;
  }
}

const outboxes = new WeakMap<CallInfo, DuplexOutbox>();

/** The outbox of a duplex call, for the attempt that carries it (interceptors pass the call object on unchanged). */
export function outboxOf(call: CallInfo): DuplexOutbox | undefined {
  return outboxes.get(call);
}

export function createOutbox(call: CallInfo): DuplexOutbox {
  const outbox = new DuplexOutbox(call);
  outboxes.set(call, outbox);
  return outbox;
}
