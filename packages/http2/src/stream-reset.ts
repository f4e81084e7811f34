import type { Http2Stream } from 'node:http2';

/**
 * Resets a node:http2 stream (RST_STREAM with `code`) on the next turn of the event loop, never at once.
 *
 * Why: node submits an RST_STREAM by first flushing every frame the session has pending (Http2Stream::
 * SubmitRstStream calls SendPendingData, nghttp2_session_mem_send). node runs JavaScript — the stream's 'close'
 * listeners and then the whole microtask queue — inside nghttp2's own on_stream_close callback, in the middle of
 * reading the peer's frames. A reset issued there (say, a caller that cancels its other calls when one fails)
 * re-enters nghttp2: it asks for the DATA of the very stream it is closing, which node has already forgotten,
 * gets 0 bytes without end of stream, and sends empty DATA frames forever — the process stops and its memory
 * grows by ~140 MB/s until it is killed. Node 20.20 (nghttp2 1.61) does this every time; Node 24.21 does not
 * (test/reset-in-close.test.ts). node defers only its own CANCEL code so; ours are agentlink's private codes.
 * From a timer callback nothing of nghttp2 is on the stack, so the reset goes out whole, one turn later.
 */
export function resetSoon(stream: Http2Stream, code: number): void {
  setImmediate(resetNow, stream, code);
}

function resetNow(stream: Http2Stream, code: number): void {
  if (!stream.closed && !stream.destroyed) stream.close(code);
}
