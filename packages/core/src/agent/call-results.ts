import type { AgentError } from '../errors.js';
import type { CallHandler } from './interceptor.js';
import { ItemIterator, type ItemSource } from './item-iterator.js';

/** The outermost handler of `send`: settles one promise with the call's result or error. */
export class UnaryResult<Out> implements CallHandler {
  readonly promise: Promise<Out>;
  private resolve!: (value: Out) => void;
  private reject!: (error: AgentError) => void;
  private body: unknown;

  constructor() {
    this.promise = new Promise<Out>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }

  onResponse(body: unknown): void {
    this.body = body;
  }

  onEnd(): void {
    this.resolve(this.body as Out);
  }

  onError(error: AgentError): void {
    this.reject(error);
  }
}

/**
 * Items taken from the network before the consumer asks for them. A few keep the network read going while the
 * consumer's loop body runs (tokens arrive in bursts); more would weaken backpressure. Bounded by count and by
 * bytes (about one mux window): what a slow consumer holds per stream does not grow with the items' size.
 */
const READ_AHEAD_ITEMS = 8;
export const READ_AHEAD_BYTES = 256 * 1024;

/**
 * The outermost handler of `stream`: hands items to the consumer's `for await` (an {@link ItemIterator}). Once the
 * consumer is `READ_AHEAD_ITEMS` or `READ_AHEAD_BYTES` behind, `onItem` returns a promise, so the network reads no
 * further (backpressure); the read goes on once the consumer took half of that (a low-water mark: one hold and
 * release per few items rather than per item while a burst arrives faster than the loop takes it).
 */
export class StreamItems<Out> implements CallHandler, ItemSource<Out> {
  private readonly buffered: Out[] = [];
  private readonly sizes: number[] = [];
  private bufferedBytes = 0;
  private ended = false;
  private failure: AgentError | undefined;
  private waiter: { resolve(result: IteratorResult<Out, void>): void; reject(error: AgentError): void } | undefined;
  private release: (() => void) | undefined;

  /** `abortedBy`: why the whole call was aborted, once it was; from then on nothing buffered is handed out. */
  constructor(private readonly abortedBy: () => AgentError | undefined = () => undefined) {}

  get finished(): boolean {
    return this.ended || this.failure !== undefined;
  }

  onResponse(body: unknown): void {
    this.onItem(body);
  }

  onItem(item: unknown, size = 0): void | Promise<void> {
    if (this.waiter) {
      const waiter = this.waiter;
      this.waiter = undefined;
      waiter.resolve({ done: false, value: item as Out });
      return;
    }
    this.buffered.push(item as Out);
    this.sizes.push(size);
    this.bufferedBytes += size;
    if (this.buffered.length < READ_AHEAD_ITEMS && this.bufferedBytes < READ_AHEAD_BYTES) return;
    return new Promise<void>((resolve) => (this.release = resolve));
  }

  onEnd(): void {
    this.ended = true;
    this.wake();
  }

  onError(error: AgentError): void {
    this.failure = error;
    this.wake();
  }

  /** The next item or the end if ready; the call's error (at once after an abort: buffered items are dropped). */
  poll(): IteratorResult<Out, void> | undefined {
    const aborted = this.abortedBy();
    if (aborted) {
      this.buffered.length = 0;
      this.sizes.length = 0;
      this.bufferedBytes = 0;
      this.unhold();
      throw aborted;
    }
    if (this.buffered.length > 0) {
      const value = this.buffered.shift()!;
      this.bufferedBytes -= this.sizes.shift()!;
      if (this.release && this.buffered.length <= READ_AHEAD_ITEMS / 2 && this.bufferedBytes <= READ_AHEAD_BYTES / 2) this.unhold();
      return { done: false, value };
    }
    if (this.failure) throw this.failure;
    if (this.ended) return DONE;
    return undefined;
  }

  wait(resolve: (result: IteratorResult<Out, void>) => void, reject: (error: AgentError) => void): void {
    this.waiter = { resolve, reject };
  }

  /** The next item, the end, or the call's error. */
  next(): Promise<IteratorResult<Out, void>> {
    try {
      const ready = this.poll();
      if (ready) return Promise.resolve(ready);
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise((resolve, reject) => this.wait(resolve, reject));
  }

  /**
   * The items as an async generator for a consumer's `for await`; `onLeftEarly` runs when the consumer leaves
   * before the end (break, return, a throw in its loop): the caller of `stream`/`duplex` cancels the call, a duplex
   * handler stops reading.
   */
  iterate(onLeftEarly: () => void): AsyncGenerator<Out, void, undefined> {
    return new ItemIterator(() => this, onLeftEarly);
  }

  /** The consumer left: let a held network read go on (it then sees the reset). */
  unhold(): void {
    const release = this.release;
    this.release = undefined;
    release?.();
  }

  private wake(): void {
    const waiter = this.waiter;
    if (!waiter) return;
    this.waiter = undefined;
    if (this.failure) waiter.reject(this.failure);
    else waiter.resolve(DONE);
  }
}

const DONE: IteratorResult<never, void> = Object.freeze({ done: true, value: undefined });
