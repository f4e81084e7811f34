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

/**
 * A rendezvous that paces each address at 64 KiB/s (each agent far faster, so only the address's pacer can hold
 * anything back), and a target that takes every relay and counts what arrives on each, by the caller that opened it.
 */
async function relayLab() {
  let tapped = 0;
  const tapWaits: Array<{ bytes: number; resolve(): void }> = [];
  const r = await rendezvous({
    relayBytesPerSecondPerIp: 64 * 1024,
    relayBytesPerSecond: 64 * MiB,
    // Sees each chunk as the relay reads it, before the pacer decides when it goes on.
    relayTap: (chunk) => {
      tapped += chunk.length;
      for (const wait of tapWaits.filter((w) => tapped >= w.bytes)) wait.resolve();
    },
  });
  const target = await wsClient('127.0.0.1');
  await target.send(r.address, 'rdv.register', signRecord(target.identity, recordOf(target.identity)));
  const arrivals = new Map<string, { bytes: number; whole: Promise<void>; arrived(): void }>();
  const arrivalOf = (from: string) => {
    let entry = arrivals.get(from);
    if (!entry) {
      let arrived!: () => void;
      const whole = new Promise<void>((resolve) => (arrived = resolve));
      arrivals.set(from, (entry = { bytes: 0, whole, arrived }));
    }
    return entry;
  };
  target.handleTunnel('nat.relay', ({ from }: { from: string }) => ({
    accept: true,
    onOpen: (stream: ChannelStream) => {
      const entry = arrivalOf(from);
      void (async () => {
        for (let chunk = await stream.read(); chunk; chunk = await stream.read()) {
          entry.bytes += chunk.length;
          if (entry.bytes >= 64 * 1024) entry.arrived();
        }
        await stream.end(); // the caller ended: so does the target, and the relay is over
      })().catch(() => undefined);
    },
  }));
  /** An agent at `ip` (127.0.0.x) with a relay open to the target. */
  const caller = async (ip: string) => {
    const agent = await wsClient(ip);
    await agent.send(r.address, 'rdv.register', signRecord(agent.identity, recordOf(agent.identity)));
    const { stream } = await agent.openTunnel(r.address, 'rdv.relay', { target: target.id }, { timeoutMs: 5000 });
    return { id: agent.id, stream, arrival: arrivalOf(agent.id) };
  };
  /** Resolves once the relay has read `bytes` in all. */
  const relayRead = (bytes: number): Promise<void> => new Promise((resolve) => (tapped >= bytes ? resolve() : tapWaits.push({ bytes, resolve })));
  return { r, caller, relayRead };
}

/** What the relay's pacers wait with and read time from. */
const PACER_TIMERS: Array<'setTimeout' | 'clearTimeout' | 'performance'> = ['setTimeout', 'clearTimeout', 'performance'];
const KiB64 = Buffer.alloc(64 * 1024, 0x61); // one mux DATA frame: the relay reads it as one chunk

describe("the relay's bandwidth through real relays", () => {
  it("one address's second relay waits for the address's rate; another address's relay does not", async () => {
    // The pacers' clock and their waits are the test's (sockets and their I/O are real): no wall-clock bound.
    vi.useFakeTimers({ toFake: PACER_TIMERS });
    const { caller, relayRead } = await relayLab();
    const [a, b, c] = await Promise.all(['127.0.0.3', '127.0.0.3', '127.0.0.4'].map(caller));
    // 127.0.0.3's first 64 KiB: its second of burst, through at once.
    await a!.stream.write(KiB64);
    await a!.arrival.whole;
    // Its second relay's 64 KiB: read by the relay, then held for the address's rate (before 2026-11-24 it went at
    // once, at its own key's rate).
    await b!.stream.write(KiB64);
    await relayRead(2 * 64 * 1024);
    // Another address's 64 KiB, read after it, goes at once, and over the same connection to the target: had the
    // relay sent b's on, they would have arrived first.
    await c!.stream.write(KiB64);
    await c!.arrival.whole;
    expect(b!.arrival.bytes).toBe(0);
    // A second of the pacers' clock later (64 KiB at 64 KiB/s), they go.
    await vi.advanceTimersByTimeAsync(1000);
    await b!.arrival.whole;
    expect(b!.arrival.bytes).toBe(64 * 1024);
  });

  it("an address that closes its relay and opens another finds its pacer as it left it, not full again", async () => {
    vi.useFakeTimers({ toFake: PACER_TIMERS });
    const { r, caller, relayRead } = await relayLab();
    const [a, c] = await Promise.all(['127.0.0.3', '127.0.0.4'].map(caller));
    await a!.stream.write(KiB64); // 127.0.0.3's second of burst
    await a!.arrival.whole;
    await a!.stream.end(); // and its relay ends: the target ends too, the relay gives its place and pacers back
    while ((await r.health()).relays > 1) await new Promise((resolve) => setImmediate(resolve));
    // A fresh key at the same address, a new relay: until 2026-11-24 the address's pacer had been forgotten with
    // the last relay and this one found it full.
    const b = await caller('127.0.0.3');
    await b.stream.write(KiB64);
    await relayRead(2 * 64 * 1024);
    await c!.stream.write(KiB64);
    await c!.arrival.whole;
    expect(b.arrival.bytes).toBe(0);
    await vi.advanceTimersByTimeAsync(1000);
    await b.arrival.whole;
  });
});
