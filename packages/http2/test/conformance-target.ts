import type { ConformanceTarget } from '@agentlink/conformance';

/** This channel as the conformance and hostile-peer suites see it. */
export const target: ConformanceTarget = {
  name: 'http2',
  module: new URL('../src/index.ts', import.meta.url).href,
  factory: 'http2',
  listenOptions: { port: 0 },
  socket: 'tcp',
  // 8 MiB stream window + 1 MiB read buffer before pausing + socket buffers.
  maxStreamBufferBytes: 12 * 1024 * 1024,
};
