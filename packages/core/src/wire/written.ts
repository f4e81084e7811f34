/**
 * The promise a ChannelStream's `write` or `endWith` returns when the transport took the bytes before returning
 * (the mux does for a write within the peer's credit and the pipe's room): FramedStream then settles the write at
 * once, with no promise chain of its own. Any other promise is followed as usual, so a transport that never
 * returns this one loses nothing but the shortcut.
 */
export const WRITTEN: Promise<void> = Promise.resolve();
