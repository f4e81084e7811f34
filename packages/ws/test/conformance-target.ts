import type { ConformanceTarget } from '@agentlink/conformance';

/** This channel as the conformance and hostile-peer suites see it. */
export const target: ConformanceTarget = {
  name: 'ws',
  module: new URL('../src/index.ts', import.meta.url).href,
  factory: 'webSocket',
  listenOptions: { port: 0 },
  socket: 'tcp',
  // 256 KiB mux window + the socket and TLS buffers between the two processes.
  maxStreamBufferBytes: 1024 * 1024,
  // Streams are core's mux: the factory takes `mux` options.
  muxOptions: true,
};
