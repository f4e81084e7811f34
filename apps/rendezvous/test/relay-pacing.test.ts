import { Identity } from '@agentlink/core';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../src/config.js';
import { RelayPacers } from '../src/relay.js';

const MiB = 1024 * 1024;

/** The relay's pacers on a clock the test moves (ms). */
function pacers(limits = DEFAULT_CONFIG): { pacers: RelayPacers; clock: { now: number } } {
  const clock = { now: 0 };
  return { pacers: new RelayPacers(limits, () => clock.now), clock };
}

describe("the relay's bandwidth", () => {
  it('is shared by all the keys of one address: 100 keys get 32 MiB/s together, not 100 × 8 MiB/s', () => {
    const { pacers: relay } = pacers();
    expect(DEFAULT_CONFIG.relayBytesPerSecondPerIp).toBe(32 * MiB);
    // 100 fresh keys at one address (maxRelaysPerIp), each sending 1 MiB at once into its own relay: each is well
    // within its own 8 MiB/s, so before 2026-11-24 none waited (800 MiB/s from one address).
    const waits = Array.from({ length: 100 }, () => relay.side(Identity.generate().id, '192.0.2.1').take(MiB));
    expect(waits.slice(0, 32).every((ms) => ms === 0)).toBe(true); // the address's burst: one second's worth
    // The rest waits for the address's rate: the 100th MiB leaves (100 - 32) / 32 s after the first.
    expect(waits[99]).toBeCloseTo(((100 - 32) / 32) * 1000, 6);
    // Another address is not slowed.
    expect(relay.side(Identity.generate().id, '192.0.2.2').take(MiB)).toBe(0);
    // An IPv6 address's /64 is one client (the caller's `clientOf`); checked in ip-limits.test.ts.
  });

  it('an agent still gets its own rate, 8 MiB/s, and the address its rate back as time passes', () => {
    const { pacers: relay, clock } = pacers();
    const side = relay.side(Identity.generate().id, '192.0.2.1');
    expect(side.take(8 * MiB)).toBe(0);
    expect(side.take(8 * MiB)).toBeCloseTo(1000, 6); // its own bucket is the tighter one here
    clock.now += 2000;
    expect(side.take(8 * MiB)).toBe(0);
  });

  it('forgets a pacer once no relay uses it', () => {
    const { pacers: relay } = pacers();
    const id = Identity.generate().id;
    const a = relay.side(id, '192.0.2.1');
    const b = relay.side(id, '192.0.2.1');
    expect(relay.size).toBe(2);
    a.release();
    a.release(); // once only
    expect(relay.size).toBe(2);
    b.release();
    expect(relay.size).toBe(0);
  });
});
