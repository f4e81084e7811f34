import type { NativeConnection } from '../src/native.js';

/**
 * An engine connection for QuicChannel unit tests: nothing happens on it (its promises never settle, nothing is
 * accepted or read) unless `overrides` says so.
 */
export function fakeConnection(overrides: Partial<NativeConnection> = {}): NativeConnection {
  const never = new Promise<never>(() => undefined);
  return {
    peerKey: Buffer.alloc(32),
    remoteAddress: '127.0.0.1:1',
    stableId: 1,
    protocol: 'agentlink/2',
    earlyData: 'none',
    handshakeDone: () => never,
    tryOpenStream: () => null,
    openStream: () => never,
    acceptStream: () => never,
    acceptStreams: () => never,
    startReads: () => false,
    takeReads: () => [],
    close: () => undefined,
    closed: () => never,
    release: () => undefined,
    stats: () => ({ rttMs: 0, sentBytes: 0, receivedBytes: 0, lostPackets: 0, congestionWindow: 0, heldWrites: 0, heldWriteFailures: 0, quietProbes: 0 }),
    heldWrites: () => 0,
    ...overrides,
  };
}
