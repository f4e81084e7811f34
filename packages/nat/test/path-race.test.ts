import { Identity, type Agent, type AgentId, type ChannelPath } from '@agentlink/core';
import type { Channel, ListenContext } from '@agentlink/core/transport';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  MAX_ANSWERS_IN_FLIGHT,
  MAX_PUNCHING_PEERS,
  PathStrategy,
  PunchHistory,
  Puncher,
  punchTargets,
  signRecord,
  type NatDiscovery,
  type PeerRecord,
  type RelayPath,
} from '../src/index.js';

/**
 * The race between punch and relay, and the upgrade after it, with fake timers: the puncher and the relay are
 * stand-ins whose outcomes the test settles at chosen moments.
 */
const peer = Identity.generate().id;

function record(nat: PeerRecord['nat']): PeerRecord {
  return { agentId: peer, candidates: ['quic://203.0.113.9:40000'], nat, portDelta: 1, seq: 1, expiresAt: Date.now() + 60_000 };
}

function fakeChannel(path?: ChannelPath): Channel {
  return { peer, kind: path === 'relay' ? 'relay' : 'quic', path, isClosed: false, close: vi.fn() } as unknown as Channel;
}

/** A promise the test settles later. */
function later<T>(): { promise: Promise<T>; resolve(value: T): void; reject(error: unknown): void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

interface Harness {
  strategy: PathStrategy;
  punches: Array<ReturnType<typeof later<Channel | undefined>>>;
  relays: Array<ReturnType<typeof later<Channel>>>;
  onChannel: ReturnType<typeof vi.fn>;
  reported: Array<{ path: ChannelPath }>;
  pool: Channel[];
}

function harness(ourNat: NatDiscovery['type'] = 'cone', relayHeadStartMs = 500): Harness {
  const punches: Harness['punches'] = [];
  const relays: Harness['relays'] = [];
  const pool: Channel[] = [];
  const reported: Harness['reported'] = [];
  const onChannel = vi.fn();
  const puncher = {
    punch: vi.fn(() => {
      const attempt = later<Channel | undefined>();
      punches.push(attempt);
      return attempt.promise;
    }),
  } as unknown as Puncher;
  const relay = {
    open: vi.fn(() => {
      const attempt = later<Channel>();
      relays.push(attempt);
      return attempt.promise;
    }),
  } as unknown as RelayPath;
  const agent = { channels: () => pool } as unknown as Agent;
  const context = { onChannel } as unknown as ListenContext;
  const strategy = new PathStrategy(
    agent,
    context,
    puncher,
    relay,
    () => Promise.reject(new Error('no direct dial in these tests')),
    () => ({ type: ourNat, mapped: { host: '198.51.100.11', port: 1000 }, portDelta: 0 }),
    (_peer: AgentId, path: ChannelPath) => reported.push({ path }),
    new AbortController().signal,
    { paths: ['direct', 'punch', 'relay'], directTimeoutMs: 100, upgradeIntervalMs: 10_000, relayHeadStartMs },
  );
  return { strategy, punches, relays, onChannel, reported, pool };
}

/** A cone pair with no head start whose relay won the race: relayed, its first punch still under way. */
async function relayedAtOnce(): Promise<Harness> {
  const h = harness('cone', 0);
  const connecting = h.strategy.connect(peer, record('cone'), new AbortController().signal);
  await vi.advanceTimersByTimeAsync(0);
  const relayed = fakeChannel('relay');
  h.pool.push(relayed);
  h.relays[0]!.resolve(relayed);
  await connecting;
  return h;
}

describe('punch and relay race', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('a symmetric peer: the relay starts with the punch, carries the first call, and a later punch upgrades the path', async () => {
    const h = harness('cone');
    const connecting = h.strategy.connect(peer, record('symmetric'), new AbortController().signal);
    await vi.advanceTimersByTimeAsync(0);
    expect(h.punches).toHaveLength(1);
    expect(h.relays).toHaveLength(1); // no head start
    const relayed = fakeChannel('relay');
    h.relays[0]!.resolve(relayed);
    expect(await connecting).toBe(relayed);
    expect(relayed.path).toBe('relay');
    const punched = fakeChannel();
    h.punches[0]!.resolve(punched);
    await vi.advanceTimersByTimeAsync(0);
    expect(h.onChannel).toHaveBeenCalledWith(punched, 'punched'); // the pool moves new calls to it and retires the relay
    expect(h.reported.map((r) => r.path)).toEqual(['relay', 'punched']);
  });

  it('our own symmetric NAT races too', async () => {
    const h = harness('symmetric');
    void h.strategy.connect(peer, record('cone'), new AbortController().signal);
    await vi.advanceTimersByTimeAsync(0);
    expect(h.relays).toHaveLength(1);
  });

  it('cone pair: a punch that lands within the head start wins alone, and no relay is opened', async () => {
    const h = harness('cone', 500);
    const connecting = h.strategy.connect(peer, record('cone'), new AbortController().signal);
    await vi.advanceTimersByTimeAsync(499);
    expect(h.relays).toHaveLength(0);
    const punched = fakeChannel();
    h.punches[0]!.resolve(punched);
    expect(await connecting).toBe(punched);
    expect(punched.path).toBe('punched');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(h.relays).toHaveLength(0);
  });

  it('cone pair: a punch still silent after the head start gets the relay beside it; the relay wins, the punch upgrades later', async () => {
    const h = harness('cone', 500);
    const connecting = h.strategy.connect(peer, record('cone'), new AbortController().signal);
    await vi.advanceTimersByTimeAsync(499);
    expect(h.relays).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.relays).toHaveLength(1);
    const relayed = fakeChannel('relay');
    h.relays[0]!.resolve(relayed);
    expect(await connecting).toBe(relayed);
    const punched = fakeChannel();
    h.punches[0]!.resolve(punched);
    await vi.advanceTimersByTimeAsync(0);
    expect(h.onChannel).toHaveBeenCalledWith(punched, 'punched');
  });

  it('a punch that fails before the head start ends starts the relay at once, and the next connection to that peer races from the start', async () => {
    const h = harness('cone', 500);
    const first = h.strategy.connect(peer, record('cone'), new AbortController().signal);
    await vi.advanceTimersByTimeAsync(100);
    h.punches[0]!.resolve(undefined); // a firewall drops UDP between the NATs
    await vi.advanceTimersByTimeAsync(0);
    expect(h.relays).toHaveLength(1);
    h.relays[0]!.resolve(fakeChannel('relay'));
    await first;
    expect(h.strategy.relayHeadStart(peer, record('cone'))).toBe(0);
    expect(h.strategy.relayHeadStart(Identity.generate().id, record('cone'))).toBe(500);
    void h.strategy.connect(peer, record('cone'), new AbortController().signal);
    await vi.advanceTimersByTimeAsync(0);
    expect(h.relays).toHaveLength(2);
  });

  it('relayed after a failed punch: a punch is tried again every upgrade interval until one works', async () => {
    const h = await relayedAtOnce();
    h.punches[0]!.resolve(undefined);
    await vi.advanceTimersByTimeAsync(9_999);
    expect(h.punches).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.punches).toHaveLength(2);
    h.punches[1]!.resolve(undefined);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(h.punches).toHaveLength(3);
    const punched = fakeChannel();
    h.punches[2]!.resolve(punched);
    await vi.advanceTimersByTimeAsync(0);
    expect(h.onChannel).toHaveBeenCalledWith(punched, 'punched');
    await vi.advanceTimersByTimeAsync(30_000);
    expect(h.punches).toHaveLength(3); // upgraded: no more retries
  });

  it("relayed, and the peer's dial lands before ours: the upgrade is reported once, and the retries stop", async () => {
    const h = await relayedAtOnce();
    h.punches[0]!.resolve(undefined); // our dial did not get through
    await vi.advanceTimersByTimeAsync(10_000);
    expect(h.punches).toHaveLength(2); // the first retry is under way
    const theirs = fakeChannel('punched'); // the peer's dial reached us: labelled as it entered the pool
    h.pool.push(theirs);
    h.strategy.punchedArrived(theirs);
    expect(h.reported.map((r) => r.path)).toEqual(['relay', 'punched']);
    const ours = fakeChannel(); // our retry lands too: a second direct channel, no news
    h.punches[1]!.resolve(ours);
    await vi.advanceTimersByTimeAsync(0);
    expect(h.onChannel).toHaveBeenCalledWith(ours, 'punched');
    h.strategy.punchedArrived(theirs); // and one channel is reported once
    expect(h.reported.map((r) => r.path)).toEqual(['relay', 'punched']);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(h.punches).toHaveLength(2); // upgraded: no more retries
  });

  it('fails with the relay error only when the punch failed too', async () => {
    const h = harness('cone', 0);
    const connecting = h.strategy.connect(peer, record('symmetric'), new AbortController().signal);
    const outcome = connecting.then(
      () => 'resolved',
      (e: Error) => e.message,
    );
    await vi.advanceTimersByTimeAsync(0);
    h.relays[0]!.reject(new Error('relay refused'));
    await vi.advanceTimersByTimeAsync(0);
    let settled = false;
    void outcome.then(() => (settled = true));
    await vi.advanceTimersByTimeAsync(0);
    expect(settled).toBe(false); // the punch may still work
    h.punches[0]!.resolve(undefined);
    expect(await outcome).toBe('relay refused');
  });
});

describe('punch history', () => {
  it('remembers at most maxPeers failures (the oldest goes) and forgets them after a while or on success', () => {
    let now = 0;
    const history = new PunchHistory(3, 1000, () => now);
    const peers = Array.from({ length: 5 }, () => Identity.generate().id);
    for (const p of peers) history.recordFailure(p);
    expect(history.size).toBe(3);
    expect(peers.map((p) => history.failedLately(p))).toEqual([false, false, true, true, true]);
    history.recordSuccess(peers[2]!);
    expect(history.failedLately(peers[2]!)).toBe(false);
    now = 1001;
    expect(history.failedLately(peers[3]!)).toBe(false);
    expect(history.size).toBe(1);
  });
});

describe('punch answers are bounded', () => {
  it('answers one punch per peer at a time, and at most MAX_ANSWERS_IN_FLIGHT in all', async () => {
    const dials: string[] = [];
    const puncher = new Puncher(
      { requestPunch: () => Promise.reject(new Error('unused')) } as never,
      (url, _peer, signal) =>
        new Promise((_resolve, reject) => {
          dials.push(url);
          signal.addEventListener('abort', () => reject(signal.reason));
        }),
      { timeoutMs: 60_000, predictPorts: 4 },
    );
    const closing = new AbortController();
    const request = () => {
      const identity = Identity.generate();
      const theirs = { ...record('cone'), agentId: identity.id };
      return { peer: identity.id, record: signRecord(identity, theirs) };
    };
    const first = request();
    const answers = [puncher.answer(first, closing.signal), puncher.answer(first, closing.signal)];
    expect(await answers[1]).toBeUndefined(); // the same peer again while we answer it
    for (let i = 1; i < MAX_ANSWERS_IN_FLIGHT; i++) answers.push(puncher.answer(request(), closing.signal));
    expect(await puncher.answer(request(), closing.signal)).toBeUndefined(); // one more peer than the ceiling
    expect(dials).toHaveLength(MAX_ANSWERS_IN_FLIGHT); // one cone candidate each
    closing.abort(new Error('done'));
    await Promise.allSettled(answers);
    const again = new AbortController();
    const freed = puncher.answer(request(), again.signal); // the slots are free again
    expect(dials).toHaveLength(MAX_ANSWERS_IN_FLIGHT + 1);
    again.abort(new Error('done'));
    await expect(freed).rejects.toThrow('done');
  });
});

describe('what punches from ever new peers leave behind', () => {
  afterEach(() => vi.useRealTimers());

  it('peers punched with are remembered for their window only, and at most MAX_PUNCHING_PEERS of them', async () => {
    vi.useFakeTimers();
    // A dial that fails at once: each answer is over as soon as it started, as a stranger's punch is.
    const puncher = new Puncher({ requestPunch: () => Promise.reject(new Error('unused')) } as never, () => Promise.reject(new Error('unreachable')), {
      timeoutMs: 3000,
      predictPorts: 0,
    });
    const closing = new AbortController();
    const answerFromNewPeer = () => {
      const identity = Identity.generate();
      return puncher.answer({ peer: identity.id, record: signRecord(identity, { ...record('cone'), agentId: identity.id }) }, closing.signal);
    };
    for (let i = 0; i < MAX_PUNCHING_PEERS + 500; i++) expect(await answerFromNewPeer()).toBeUndefined();
    expect(puncher.punchingPeers).toBe(MAX_PUNCHING_PEERS); // the oldest were forgotten (before: all 1,524 kept)
    vi.advanceTimersByTime(3000 + 2000 + 1);
    await answerFromNewPeer();
    expect(puncher.punchingPeers).toBe(1); // the expired ones went with the next punch (before: kept for ever)
  });
});

describe('crossing probes between two sequential symmetric NATs', () => {
  /**
   * Simulates two NATs that hand out ports in sequence: each side's k-th dial leaves from its last STUN
   * mapping + drift + k. Two dials meet when each is sent from the port the other aims at.
   */
  function meets(count: number, driftWide: number, driftSparse: number): boolean {
    const wideBase = 20_000;
    const sparseBase = 30_000;
    const wide = { ...record('symmetric'), candidates: [`quic://198.51.100.12:${sparseBase}`] };
    const sparse = { ...record('symmetric'), candidates: [`quic://198.51.100.11:${wideBase}`] };
    const ports = (targets: string[]) => targets.slice(1).map((u) => Number(new URL(u).port));
    const wideDials = ports(punchTargets(wide, count, 'wide')).map((to, k) => ({ from: wideBase + driftWide + k + 1, to }));
    const sparseDials = ports(punchTargets(sparse, count, 'sparse')).map((to, m) => ({ from: sparseBase + driftSparse + m + 1, to }));
    return wideDials.some((a) => sparseDials.some((b) => a.from === b.to && a.to === b.from));
  }

  it('meet for every drift sum below the probe count, with 3 × count dials', () => {
    for (let dw = 0; dw < 8; dw++) for (let ds = 0; dw + ds < 8; ds++) expect(meets(8, dw, ds), `drifts ${dw}, ${ds}`).toBe(true);
    expect(meets(8, 5, 5)).toBe(false); // beyond the bound: the relay carries the pair
  });

  it('one guess per side (the old prediction) meets only when neither NAT drifted', () => {
    const single = (drift: number) => {
      const a = punchTargets({ ...record('symmetric'), candidates: ['quic://198.51.100.12:30000'] }, 8, 'single').slice(1).map((u, k) => ({ from: 20_000 + drift + k + 1, to: Number(new URL(u).port) }));
      const b = punchTargets({ ...record('symmetric'), candidates: ['quic://198.51.100.11:20000'] }, 8, 'single').slice(1).map((u, m) => ({ from: 30_000 + drift + m + 1, to: Number(new URL(u).port) }));
      return a.some((x) => b.some((y) => x.from === y.to && x.to === y.from));
    };
    expect(single(0)).toBe(true);
    expect(single(1)).toBe(false);
  });

  it('the roles are opposite on the two sides, by AgentId order, and only when both NATs are symmetric', () => {
    const [low, high] = [Identity.generate().id, Identity.generate().id].sort();
    const puncherOf = (id: AgentId, nat: 'cone' | 'symmetric') =>
      new Puncher({} as never, () => Promise.reject(new Error('unused')), { timeoutMs: 1, predictPorts: 8 }, { id, nat: () => nat });
    const theirs = (id: AgentId, nat: PeerRecord['nat']) => ({ ...record(nat), agentId: id });
    expect(puncherOf(low!, 'symmetric').roleWith(theirs(high!, 'symmetric'))).toBe('wide');
    expect(puncherOf(high!, 'symmetric').roleWith(theirs(low!, 'symmetric'))).toBe('sparse');
    expect(puncherOf(low!, 'cone').roleWith(theirs(high!, 'symmetric'))).toBe('single');
  });
});

describe('reach() options of the race', () => {
  it('refuses a negative head start and more predicted ports than the ceiling, naming the option', async () => {
    const { reach, MAX_PREDICT_PORTS } = await import('../src/index.js');
    const base = { rendezvous: 'id@wss://127.0.0.1:1/agentlink', quic: {} as never };
    expect(() => reach({ ...base, relayHeadStartMs: -1 })).toThrow(/relayHeadStartMs must be an integer/);
    expect(() => reach({ ...base, predictPorts: MAX_PREDICT_PORTS + 1 })).toThrow(/predictPorts must be an integer in \[0, 32\]/);
    expect(() => reach({ ...base, punchTimeoutMs: 0 })).toThrow(/punchTimeoutMs/);
    const refused = (() => {
      try {
        reach({ ...base, relayHeadStartMs: 1.5 });
      } catch (error) {
        return (error as { code?: string }).code;
      }
    })();
    expect(refused).toBe('INVALID_ARGUMENT');
    expect(reach({ ...base, relayHeadStartMs: 0, predictPorts: MAX_PREDICT_PORTS }).name).toBe('nat');
  });

  it("refuses timer periods above node's longest delay (a heartbeat interval there re-registered every millisecond)", async () => {
    const { reach } = await import('../src/index.js');
    const base = { rendezvous: 'id@wss://127.0.0.1:1/agentlink', quic: {} as never };
    for (const name of ['heartbeatMs', 'punchTimeoutMs', 'directTimeoutMs', 'upgradeIntervalMs', 'relayHeadStartMs'] as const) {
      expect(() => reach({ ...base, [name]: 2 ** 31 })).toThrow(new RegExp(`${name} must be an integer in \\[[01], 2147483647\\], got 2147483648`));
      expect(reach({ ...base, [name]: 2 ** 31 - 1 }).name).toBe('nat');
    }
  });
});
