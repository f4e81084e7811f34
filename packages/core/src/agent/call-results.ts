import type { AgentError } from '../errors.js';
import type { CallHandler } from './interceptor.js';

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

type Pull<Out> = { done: false; value: Out } | { done: true; value: undefined };

/**
 * The outermost handler of `stream`: hands items to an async generator. Once the consumer is `READ_AHEAD_ITEMS`
 * or `READ_AHEAD_BYTES` behind, `onItem` returns a promise, so the network reads no further (backpressure).
 */
export class StreamItems<Out> implements CallHandler {
  private readonly buffered: Out[] = [];
  private readonly sizes: number[] = [];
  private bufferedBytes = 0;
  private ended = false;
  private failure: AgentError | undefined;
  private waiter: { resolve(pull: Pull<Out>): void; reject(error: AgentError): void } | undefined;
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
    if (!this.full) return;
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

  /** The next item, the end, or the call's error (at once after an abort: buffered items are dropped). */
  next(): Promise<Pull<Out>> {
    const aborted = this.abortedBy();
    if (aborted) {
      this.buffered.length = 0;
      this.sizes.length = 0;
      this.bufferedBytes = 0;
      this.unhold();
      return Promise.reject(aborted);
    }
    if (this.buffered.length > 0) {
      const value = this.buffered.shift()!;
      this.bufferedBytes -= this.sizes.shift()!;
      if (!this.full) this.unhold();
      return Promise.resolve({ done: false, value });
    }
    if (this.failure) return Promise.reject(this.failure);
    if (this.ended) return Promise.resolve({ done: true, value: undefined });
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  /**
   * The items as an async generator for a consumer's `for await`; `onLeftEarly` runs when the consumer leaves
   * before the end (break, return, a throw in its loop): the caller of `stream`/`duplex` cancels the call, a duplex
   * handler stops reading.
   */
  async *iterate(onLeftEarly: () => void): AsyncGenerator<Out, void, undefined> {
    try {
      for (;;) {
        const next = await this.next();
        if (next.done) return;
        yield next.value;
      }
    } finally {
      if (!this.finished) onLeftEarly();
    }
  }

  /** The consumer left: let a held network read go on (it then sees the reset). */
  unhold(): void {
    const release = this.release;
    this.release = undefined;
    release?.();
  }

  private get full(): boolean {
    return this.buffered.length >= READ_AHEAD_ITEMS || this.bufferedBytes >= READ_AHEAD_BYTES;
  }

  private wake(): void {
    const waiter = this.waiter;
    if (!waiter) return;
    this.waiter = undefined;
    if (this.failure) waiter.reject(this.failure);
    else waiter.resolve({ done: true, value: undefined });
  }
}
