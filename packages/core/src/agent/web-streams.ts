import { AgentError } from '../errors.js';

/** A duplex call (or anything with `abort`): cancelling the web stream aborts it with the reason's text. */
interface Abortable {
  abort(reason?: string | AgentError): void;
}

function cancelReason(reason: unknown): AgentError {
  if (reason instanceof AgentError) return reason;
  if (reason instanceof Error) return new AgentError('CANCELLED', reason.message);
  return new AgentError('CANCELLED', reason === undefined ? 'the readable stream was cancelled' : String(reason));
}

/** Options of {@link toReadableStream}. */
export interface ToReadableStreamOptions {
  /**
   * Aborted with the cancel reason (as an AgentError) when the readable stream is cancelled: pass its signal to
   * `agent.stream(…, { signal })`, so a cancel while a read waits reaches the remote handler at once, with its text.
   */
  controller?: AbortController;
}

/**
 * An agentlink stream (what `agent.stream` or `agent.duplex` returns, or any async iterable) as a WHATWG
 * `ReadableStream`, e.g. to answer an HTTP request with it. Pull-based, so a slow reader slows the remote
 * producer (backpressure). `cancel(reason)` cancels the call: a duplex call is aborted with the reason's text,
 * `options.controller` is aborted with it, and the iterator is closed (a stream's remote handler sees CANCELLED;
 * without a controller, once the read in progress returns).
 */
export function toReadableStream<T>(source: AsyncIterable<T>, options: ToReadableStreamOptions = {}): ReadableStream<T> {
  let iterator: AsyncIterator<T> | undefined;
  return new ReadableStream<T>(
    {
      async pull(controller) {
        iterator ??= source[Symbol.asyncIterator]();
        const next = await iterator.next();
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      },
      cancel(reason) {
        const error = cancelReason(reason);
        options.controller?.abort(error);
        if (typeof (source as Partial<Abortable>).abort === 'function') (source as unknown as Abortable).abort(error);
        // Not awaited: a generator waiting for its next item closes only once that wait ends.
        void Promise.resolve(iterator?.return?.()).catch(() => undefined);
      },
    },
    { highWaterMark: 0 }, // agentlink reads ahead already: the web stream buffers nothing more
  );
}

/**
 * A WHATWG `ReadableStream` as an async iterable for `handleStream`/`handleDuplex` to yield from (`yield*`).
 * When the iteration stops early (the caller cancelled, the deadline passed) the readable stream is cancelled,
 * with `signal`'s reason if given (e.g. `ctx.signal`), so the producer upstream stops too.
 */
export async function* fromReadableStream<T>(stream: ReadableStream<T>, signal?: AbortSignal): AsyncGenerator<T, void, undefined> {
  const reader = stream.getReader();
  let done = false;
  try {
    for (;;) {
      const next = await reader.read();
      if (next.done) {
        done = true;
        return;
      }
      yield next.value;
    }
  } finally {
    if (!done) await reader.cancel(signal?.reason ?? new AgentError('CANCELLED', 'the reader stopped')).catch(() => undefined);
    reader.releaseLock();
  }
}
