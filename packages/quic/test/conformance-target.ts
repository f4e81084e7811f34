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
  // 4 MiB stream window + up to two of the channel's 1 MiB reads from the engine held in JS (one being decoded, the
  // next taken; a read may pass 1 MiB by up to 64 of quinn's chunks) + 1 MiB for the items the handler's side holds.
  // 6 MiB was one item short of 110 x 64 KiB measured once in CI (2026-11-23).
  maxStreamBufferBytes: 7 * 1024 * 1024,
};
