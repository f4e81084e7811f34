import type { ConformanceTarget } from '@agentlink/conformance';

/** This channel as the conformance and hostile-peer suites see it. */
export const target: ConformanceTarget = {
  name: 'quic',
  module: new URL('../src/index.ts', import.meta.url).href,
  factory: 'quic',
  // A short idle timeout so a killed peer is detected well within the suite's 8 s deadline.
  listenOptions: { port: 0, idleTimeoutMs: 2000 },
  dialOptions: { idleTimeoutMs: 2000 },
  socket: 'udp',
  // 4 MiB stream window + what quinn and the engine hold in flight.
  maxStreamBufferBytes: 6 * 1024 * 1024,
};
