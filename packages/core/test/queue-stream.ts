import type { ChannelStream, ChunkQueue } from '../src/transport.js';

/**
 * A stream whose reads are a ChunkQueue the test fills: what a transport hands FramedStream. `push`: it also offers
 * push-style reads (`listen`), as the mux's streams do; without it FramedStream reads it pull-style only.
 */
export function queueStream(queue: ChunkQueue, { push = true }: { push?: boolean } = {}): ChannelStream {
  return {
    write: async () => undefined,
    end: async () => undefined,
    read: () => queue.read(),
    readNow: () => queue.readNow(),
    ...(push ? { listen: (sink: Parameters<ChunkQueue['listen']>[0]) => queue.listen(sink) } : {}),
    reset: (reason) => queue.fail(reason),
  };
}
