import type { AgentError } from '../errors.js';

/** What an {@link ItemIterator} reads: a buffer of items that can say at once whether one is ready. */
export interface ItemSource<Out> {
  /** True once the source reached its end or its error: the reader leaving then cancels nothing. */
  readonly finished: boolean;
  /**
   * The next item or the end if either is ready now; `undefined` when the reader must wait (then `wait` is
   * called). Throws the call's error.
   */
  poll(): IteratorResult<Out, void> | undefined;
  /** Calls back once with the next item, the end or the error (after `poll` returned undefined). */
  wait(resolve: (result: IteratorResult<Out, void>) => void, reject: (error: AgentError) => void): void;
}

const DONE: IteratorResult<never, void> = Object.freeze({ done: true, value: undefined });

/**
 * The items of a call as an `AsyncGenerator`, written by hand: an `async *` function costs several promise hops
 * per item (the generator's queue, the `await` inside it, the implicit await of `yield`, and once more for a
 * `yield*` around it), where this returns one resolved promise per item that is already buffered. It behaves as
 * the generator it replaces (`async *` with a `try/finally` around a loop over the source): nothing happens until
 * the first `next()` (then `open` runs, and a throw from it rejects that `next`); `return()` and `throw()` end it,
 * calling `onLeftEarly` when the source has not finished (the consumer broke out of its loop); after its end or
 * its error every `next()` is done; calls made while one is pending wait for it, in order.
 */
export class ItemIterator<Out> implements AsyncGenerator<Out, void, undefined> {
  private source: ItemSource<Out> | undefined;
  private state: 'start' | 'open' | 'done' = 'start';
  /** A `next()` still waiting for the source: later calls queue behind it, as an async generator's do. */
  private pending: Promise<unknown> | undefined;

  constructor(
    private readonly open: () => ItemSource<Out>,
    private readonly onLeftEarly: () => void,
  ) {}

  next(): Promise<IteratorResult<Out, void>> {
    if (this.pending) return this.queued(() => this.next());
    if (this.state === 'done') return Promise.resolve(DONE);
    let source = this.source;
    if (!source) {
      try {
        source = this.source = this.open();
        this.state = 'open';
      } catch (error) {
        this.state = 'done';
        return Promise.reject(error);
      }
    }
    let ready: IteratorResult<Out, void> | undefined;
    try {
      ready = source.poll();
    } catch (error) {
      this.stop();
      return Promise.reject(error);
    }
    if (ready) {
      if (ready.done) this.state = 'done';
      return Promise.resolve(ready);
    }
    const waiting = new Promise<IteratorResult<Out, void>>((resolve, reject) =>
      source.wait(
        (result) => {
          this.pending = undefined;
          if (result.done) this.state = 'done';
          resolve(result);
        },
        (error) => {
          this.pending = undefined;
          this.stop();
          reject(error);
        },
      ),
    );
    this.pending = waiting;
    return waiting;
  }

  /** Ends the items; resolves with `value` (awaited), as an async generator's `return(value)` does. */
  return(value?: void | PromiseLike<void>): Promise<IteratorResult<Out, void>> {
    if (this.pending) return this.queued(() => this.return(value));
    try {
      this.stop();
    } catch (error) {
      return Promise.reject(error); // as an async generator whose `finally` throws: a rejection, not a throw
    }
    if (value === undefined) return Promise.resolve(DONE);
    return Promise.resolve(value).then((settled) => ({ done: true, value: settled }));
  }

  throw(error: unknown): Promise<IteratorResult<Out, void>> {
    if (this.pending) return this.queued(() => this.throw(error));
    try {
      this.stop();
    } catch (stopError) {
      return Promise.reject(stopError);
    }
    return Promise.reject(error);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** Ended by the consumer or by the source's error: the generator's `finally` (cancel unless the source finished). */
  private stop(): void {
    if (this.state === 'open' && !this.source!.finished) {
      this.state = 'done';
      this.onLeftEarly();
    }
    this.state = 'done';
  }

  private queued<T>(then: () => Promise<T>): Promise<T> {
    return this.pending!.then(then, then);
  }
}

// `await using` on the items, as on an async generator of runtimes that have it.
const asyncDispose = (Symbol as { asyncDispose?: symbol }).asyncDispose;
if (asyncDispose) {
  Object.defineProperty(ItemIterator.prototype, asyncDispose, {
    value(this: ItemIterator<unknown>) {
      return this.return().then(() => undefined);
    },
  });
}
