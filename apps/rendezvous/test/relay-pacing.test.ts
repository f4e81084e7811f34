import { Identity } from '@agentlink/core';
import type { ChannelStream } from '@agentlink/core/transport';
import { signRecord } from '@agentlink/nat';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_CONFIG } from '../src/config.js';
import { RelayPacers } from '../src/relay.js';
import { cleanup, recordOf, rendezvous, wsClient } from './helpers.js';

afterEach(async () => {
  vi.useRealTimers();
  await cleanup();
});

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

  it('keeps an unused pacer until it is full again: an address that closes its relay and opens another gets no fresh burst', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { pacers: relay, clock } = pacers();
    // One address opens a relay with a fresh key, sends 8 MiB at once and closes it, five times over, all at once.
    // Until 2026-11-24 each relay's end forgot the address's pacer, and each next one found it full: no wait ever.
    const waits = Array.from({ length: 5 }, () => {
      const side = relay.side(Identity.generate().id, '192.0.2.1');
      const wait = side.take(8 * MiB);
      side.release();
      return wait;
    });
    // The address's 32 MiB second goes to the first four; the fifth waits for 8 MiB at 32 MiB/s.
    expect(waits.slice(0, 4)).toEqual([0, 0, 0, 0]);
    expect(waits[4]).toBeCloseTo(250, 6);
    // Unused, each pacer is forgotten once it would be full again: the keys' after 1 s, the address's after 1.25 s.
    expect(relay.size).toBe(6);
    clock.now += 1000;
    vi.advanceTimersByTime(1000);
    expect(relay.size).toBe(1);
    clock.now += 250;
    vi.advanceTimersByTime(250);
    expect(relay.size).toBe(0);
    // Forgotten full, it comes back full: nothing owed is lost.
    expect(relay.side(Identity.generate().id, '192.0.2.1').take(8 * MiB)).toBe(0);
  });
});

describe("the relay's bandwidth through real relays", () => {
  it("one address's second relay waits for the address's rate; another address's relay does not", async () => {
    // 64 KiB a second per address; per agent far more, so only the address's pacer can hold anything back.
    const r = await rendezvous({ relayBytesPerSecondPerIp: 64 * 1024, relayBytesPerSecond: 64 * MiB });
    // The target: takes every relay and counts what arrives on each, by the caller that opened it.
    const target = await wsClient('127.0.0.1');
    await target.send(r.address, 'rdv.register', signRecord(target.identity, recordOf(target.identity)));
    const arrived = new Map<string, { bytes: number; done: Promise<number> }>();
    target.handleTunnel('nat.relay', ({ from }: { from: string }) => ({
      accept: true,
      onOpen: (stream: ChannelStream) => {
        let bytes = 0;
        const done = (async () => {
          for (let chunk = await stream.read(); chunk; chunk = await stream.read()) {
            bytes += chunk.length;
            if (bytes >= 64 * 1024) return performance.now();
          }
          return Number.NaN;
        })();
        arrived.set(from, { get bytes() { return bytes; }, done });
      },
    }));
    const callers = await Promise.all(
      ['127.0.0.3', '127.0.0.3', '127.0.0.4'].map(async (ip) => {
        const caller = await wsClient(ip);
        await caller.send(r.address, 'rdv.register', signRecord(caller.identity, recordOf(caller.identity)));
        const { stream } = await caller.openTunnel(r.address, 'rdv.relay', { target: target.id }, { timeoutMs: 5000 });
        return { caller, stream };
      }),
    );
    const [a, b, c] = callers as [(typeof callers)[0], (typeof callers)[0], (typeof callers)[0]];
    const started = performance.now();
    // 64 KiB each: the first uses 127.0.0.3's second of burst, the second must wait a second for its rate (before
    // 2026-11-24 it went at once, at its own key's rate); 127.0.0.4's goes at once.
    for (const { stream } of [a, b, c]) await stream.write(Buffer.alloc(64 * 1024, 0x61));
    const until = async (id: string): Promise<number> => {
      while (!arrived.has(id)) await new Promise((resolve) => setImmediate(resolve));
      return (await arrived.get(id)!.done) - started;
    };
    const [first, second, other] = await Promise.all([until(a.caller.id), until(b.caller.id), until(c.caller.id)]);
    // The pacer waits at least (64 KiB over the burst) / 64 KiB/s = 1 s (less a timer's rounding).
    expect(second).toBeGreaterThanOrEqual(900);
    expect(first).toBeLessThan(second);
    expect(other).toBeLessThan(second);
  });
});
