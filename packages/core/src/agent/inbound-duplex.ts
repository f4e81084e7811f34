import { AgentError, toAgentError } from '../errors.js';
import type { FramedStream } from '../wire/framed-stream.js';
import { StreamItems } from './call-results.js';

/** What the reader of a duplex call's incoming items needs from the call it serves. */
export interface IncomingOwner {
  /** True once the handler's reply is complete: the caller may end its side now. */
  readonly replied: boolean;
  abort(reason: AgentError): void;
}

/**
 * The caller's items of a duplex call, on the handler's side: read from the stream into a buffer the handler
 * iterates. The buffer is bounded like a caller's read-ahead (`StreamItems`: 8 items or 256 KiB); when it is
 * full the stream is not read, so the transport's window closes and the caller's `send` waits (backpressure).
 */
export class IncomingItems {
  private readonly items: StreamItems<unknown>;
  private callerEnded = false;
  /** The handler no longer reads them (it finished, failed or left its loop): items are dropped as they come. */
  private dropping = false;

  constructor(abortedBy: () => AgentError | undefined) {
    this.items = new StreamItems(abortedBy);
  }

  /** The handler's view: ends with the caller's `end`, throws the call's abort reason. */
  iterate(): AsyncGenerator<unknown, void, undefined> {
    return this.items.iterate(() => this.drop());
  }

  /** The call was aborted: the handler's loop throws `reason`, a held read goes on (and sees the reset). */
  fail(reason: AgentError): void {
    this.items.onError(reason);
    this.items.unhold();
  }

  /** Nobody reads the items any more: a held read goes on, later items are discarded (so the stream drains). */
  drop(): void {
    this.dropping = true;
    this.items.unhold();
  }

  /**
   * Reads the caller's frames until its side of the stream ends: `item`s, one `end`, then possibly a `cancel`.
   * A stream that ends before the reply is complete, or anything else, aborts the call.
   */
  async read(framed: FramedStream, owner: IncomingOwner): Promise<void> {
    try {
      for (;;) {
        const message = await framed.receive();
        if (message === undefined) {
          if (!owner.replied) owner.abort(new AgentError('CANCELLED', 'caller ended the stream'));
          return;
        }
        switch (message.type) {
          case 'item': {
            if (this.callerEnded) return owner.abort(new AgentError('PROTOCOL_ERROR', 'item from the caller after its end'));
            if (this.dropping) continue;
            const held = this.items.onItem(message.body, framed.lastFrameBytes);
            if (held) await held;
            continue;
          }
          case 'end':
            if (this.callerEnded) return owner.abort(new AgentError('PROTOCOL_ERROR', 'second end from the caller'));
            this.callerEnded = true;
            this.items.onEnd();
            continue;
          case 'cancel':
            return owner.abort(new AgentError(message.code, message.message, { remote: true }));
          default:
            return owner.abort(new AgentError('PROTOCOL_ERROR', `unexpected ${message.type} from the caller`));
        }
      }
    } catch (error) {
      owner.abort(toAgentError(error, 'CANCELLED'));
    }
  }
}
