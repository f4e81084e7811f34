import { Identity } from '@agentlink/core';
import { describe, expect, it } from 'vitest';
import { CONNECT_TIMES_PEERS, ConnectTimes } from '../src/index.js';

describe('connect times (the path event’s ms)', () => {
  it('measures from the last start to a peer', () => {
    let now = 100;
    const times = new ConnectTimes(4, () => now);
    const peer = Identity.generate().id;
    times.start(peer);
    now = 350;
    expect(times.since(peer)).toBe(250);
    times.start(peer); // a later connection counts from its own start
    now = 400;
    expect(times.since(peer)).toBe(50);
    expect(times.since(Identity.generate().id)).toBe(0); // never dialled: found by the peer's own dial
  });

  it('keeps the starts of the last maxPeers peers only (an agent that dials a new peer a minute stays bounded)', () => {
    let now = 0;
    const times = new ConnectTimes(3, () => now);
    const peers = Array.from({ length: 5 }, () => Identity.generate().id);
    for (const p of peers) times.start(p);
    expect(times.size).toBe(3);
    times.start(peers[2]!); // dialled again: the newest now, so peers[3] is the oldest kept
    times.start(Identity.generate().id);
    now = 10;
    expect(peers.map((p) => times.since(p))).toEqual([0, 0, 10, 0, 10]);
    expect(times.size).toBe(3);
  });

  it('defaults to CONNECT_TIMES_PEERS', () => {
    const times = new ConnectTimes();
    for (let i = 0; i < CONNECT_TIMES_PEERS + 10; i++) times.start(`peer-${i}` as never);
    expect(times.size).toBe(CONNECT_TIMES_PEERS);
  });
});
