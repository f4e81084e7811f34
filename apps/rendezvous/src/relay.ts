import { AgentError, toAgentError, type AgentId } from '@agentlink/core';
import { type ChannelStream } from '@agentlink/core/transport';
import { boundHint } from './config.js';

export interface RelayLimits {
  maxRelaysPerAgent: number;
  maxRelaysPerTarget: number;
  maxRelaysPerTargetPerIp: number;
  maxRelaysPerIp: number;
  maxRelays: number;
  relayBytesPerSecond: number;
  relayBytesPerSecondPerIp: number;
  relayIdleMs: number;
}

/** Paces bytes to a rate (a token bucket counted in bytes, one second of burst). */
class BytePacer {
  private allowance: number;
  private updatedAt: number;

  constructor(
    private readonly bytesPerSecond: number,
    private readonly now: () => number,
  ) {
    this.allowance = bytesPerSecond;
    this.updatedAt = now();
  }

  /** Milliseconds to wait before sending `bytes`. */
  take(bytes: number): number {
    const now = this.now();
    this.allowance = Math.min(this.bytesPerSecond, this.allowance + ((now - this.updatedAt) / 1000) * this.bytesPerSecond);
    this.updatedAt = now;
    this.allowance -= bytes;
    return this.allowance >= 0 ? 0 : (-this.allowance / this.bytesPerSecond) * 1000;
  }

  /** Milliseconds until the bucket is full again (a second of burst), as a new pacer starts. */
  untilFull(): number {
    const allowance = this.allowance + ((this.now() - this.updatedAt) / 1000) * this.bytesPerSecond;
    return allowance >= this.bytesPerSecond ? 0 : ((this.bytesPerSecond - allowance) / this.bytesPerSecond) * 1000;
  }
}

interface HeldPacer {
  pacer: BytePacer;
  users: number;
  /** Set while no relay uses the pacer and it refills: it is forgotten when the timer fires. */
  forget: NodeJS.Timeout | undefined;
}

/** How one side of a relay is paced: what it sends waits for both its agent's and its client's pacer. */
export interface PacedSide {
  /** Milliseconds to wait before sending `bytes` (taken from both pacers). */
  take(bytes: number): number;
  /** The relay ended: its pacers are forgotten once no relay uses them. */
  release(): void;
}

/**
 * The byte pacers of the relay: one per agent (`relayBytesPerSecond`) and one per client, its IP or IPv6 /64
 * (`relayBytesPerSecondPerIp`), each kept while a relay uses it and then until it is full again. Keys cost nothing:
 * paced per agent only, one address with `maxRelaysPerIp` (100) keys had 100 × 8 MiB/s of the relay's bandwidth.
 * A pacer forgotten as its last relay ended (until 2026-11-24) came back full: an address that sent a second's
 * worth, closed its relay and opened the next was never paced at all.
 */
export class RelayPacers {
  private readonly agents = new Map<AgentId, HeldPacer>();
  private readonly clients = new Map<string, HeldPacer>();

  constructor(
    private readonly limits: Pick<RelayLimits, 'relayBytesPerSecond' | 'relayBytesPerSecondPerIp'>,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The pacing of what `agent`, connected from `client`, sends into one relay. */
  side(agent: AgentId, client: string): PacedSide {
    const own = this.hold(this.agents, agent, this.limits.relayBytesPerSecond);
    const shared = this.hold(this.clients, client, this.limits.relayBytesPerSecondPerIp);
    let released = false;
    return {
      take: (bytes) => Math.max(own.pacer.take(bytes), shared.pacer.take(bytes)),
      release: () => {
        if (released) return;
        released = true;
        this.drop(this.agents, agent);
        this.drop(this.clients, client);
      },
    };
  }

  /** Pacers held now (agents and clients, in use or refilling), for tests. */
  get size(): number {
    return this.agents.size + this.clients.size;
  }

  private hold<K>(map: Map<K, HeldPacer>, key: K, bytesPerSecond: number): HeldPacer {
    let entry = map.get(key);
    if (!entry) map.set(key, (entry = { pacer: new BytePacer(bytesPerSecond, this.now), users: 0, forget: undefined }));
    clearTimeout(entry.forget);
    entry.forget = undefined;
    entry.users++;
    return entry;
  }

  /**
   * One relay less uses the pacer. Unused, it is kept until full again (at most a second, plus what its relays
   * still owed), then forgotten: a new one would start full, so forgetting it sooner gave its bytes back.
   */
  private drop<K>(map: Map<K, HeldPacer>, key: K): void {
    const entry = map.get(key);
    if (!entry || --entry.users > 0) return;
    const ms = entry.pacer.untilFull();
    if (ms <= 0) return void map.delete(key);
    entry.forget = setTimeout(() => map.delete(key), Math.ceil(ms));
    entry.forget.unref();
  }
}

/** A relay's place in the limits, taken before its tunnel to the target is opened; given back once. */
export interface RelaySlot {
  readonly caller: AgentId;
  readonly target: AgentId;
  /** The caller's client (its IP, or its IPv6 /64: `clientOf`). */
  readonly ip: string;
  /** The target's client: where its replies into the relay are charged. */
  readonly targetIp: string;
  release(): void;
}

/**
 * The relay: pipes bytes between two agents' tunnels without looking at them (they carry TLS end to end).
 * Limits relays per caller, per target, per target from one caller IP, per caller IP and in all, paces each agent's
 * and each client's bytes, and closes relays that stay idle.
 *
 * A relay holds its place from the moment it is admitted (before the tunnel to the target is opened, which takes
 * a round trip), so requests that arrive together cannot all pass the check before any of them is counted.
 */
export class Relays {
  /** Relays each agent opened (its own quota: what strangers open towards it never uses it up). */
  private readonly opened = new Map<AgentId, number>();
  /** Relays towards each agent. */
  private readonly towards = new Map<AgentId, number>();
  /** Relays opened from each IP: keys cost nothing, addresses do. */
  private readonly fromIp = new Map<string, number>();
  /**
   * Relays towards each agent from each IP (`target ip`): a few addresses with fresh keys could otherwise hold all
   * `maxRelaysPerTarget` towards an agent (alive with a byte a minute) and nobody else could be relayed to it.
   */
  private readonly towardsFromIp = new Map<string, number>();
  private readonly pacers: RelayPacers;
  private active = 0;
  bytesRelayed = 0;

  constructor(
    private readonly limits: RelayLimits,
    /** Sees every relayed chunk (tests assert it is ciphertext). */
    private readonly tap?: (chunk: Uint8Array) => void,
  ) {
    this.pacers = new RelayPacers(limits);
  }

  /** Relays held now (open, or admitted and opening). */
  get count(): number {
    return this.active;
  }

  /**
   * Takes a place for a new relay from `caller` (at client `ip`) to `target` (at client `targetIp`); throws
   * RESOURCE_EXHAUSTED when a limit is hit.
   */
  admit(caller: AgentId, target: AgentId, ip: string, targetIp: string): RelaySlot {
    const pair = `${target} ${ip}`;
    if (this.active >= this.limits.maxRelays) throw new AgentError('RESOURCE_EXHAUSTED', `relay full (${boundHint('maxRelays', this.limits.maxRelays)})`);
    if ((this.opened.get(caller) ?? 0) >= this.limits.maxRelaysPerAgent) {
      throw new AgentError('RESOURCE_EXHAUSTED', `at most ${this.limits.maxRelaysPerAgent} relays per agent (${boundHint('maxRelaysPerAgent', this.limits.maxRelaysPerAgent)})`);
    }
    if ((this.towards.get(target) ?? 0) >= this.limits.maxRelaysPerTarget) {
      throw new AgentError('RESOURCE_EXHAUSTED', `at most ${this.limits.maxRelaysPerTarget} relays towards one agent (${boundHint('maxRelaysPerTarget', this.limits.maxRelaysPerTarget)})`);
    }
    if ((this.towardsFromIp.get(pair) ?? 0) >= this.limits.maxRelaysPerTargetPerIp) {
      throw new AgentError('RESOURCE_EXHAUSTED', `at most ${this.limits.maxRelaysPerTargetPerIp} relays towards one agent from one address (${boundHint('maxRelaysPerTargetPerIp', this.limits.maxRelaysPerTargetPerIp)})`);
    }
    if ((this.fromIp.get(ip) ?? 0) >= this.limits.maxRelaysPerIp) {
      throw new AgentError('RESOURCE_EXHAUSTED', `at most ${this.limits.maxRelaysPerIp} relays from one address (${boundHint('maxRelaysPerIp', this.limits.maxRelaysPerIp)})`);
    }
    this.active++;
    add(this.opened, caller, 1);
    add(this.towards, target, 1);
    add(this.fromIp, ip, 1);
    add(this.towardsFromIp, pair, 1);
    let released = false;
    return {
      caller,
      target,
      ip,
      targetIp,
      release: () => {
        if (released) return;
        released = true;
        this.active--;
        add(this.opened, caller, -1);
        add(this.towards, target, -1);
        add(this.fromIp, ip, -1);
        add(this.towardsFromIp, pair, -1);
      },
    };
  }

  /** Pipes the caller's tunnel `a` and the target's `b` until both ends finish; then gives `slot` back. */
  pipe(slot: RelaySlot, a: ChannelStream, b: ChannelStream): void {
    const { caller, target } = slot;
    let lastActivity = Date.now();
    let closed = false;
    const close = (reason: AgentError): void => {
      if (closed) return;
      closed = true;
      clearInterval(idleCheck);
      a.reset(reason);
      b.reset(reason);
    };
    const idleCheck = setInterval(() => {
      if (Date.now() - lastActivity >= this.limits.relayIdleMs) close(new AgentError('DEADLINE_EXCEEDED', `relay idle for ${this.limits.relayIdleMs} ms`));
    }, Math.min(5000, this.limits.relayIdleMs / 2));
    idleCheck.unref();
    const pump = async (from: ChannelStream, to: ChannelStream, pacer: PacedSide): Promise<void> => {
      for (let chunk = await from.read(); chunk; chunk = await from.read()) {
        lastActivity = Date.now();
        this.tap?.(chunk);
        this.bytesRelayed += chunk.length;
        const wait = pacer.take(chunk.length);
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        await to.write(chunk);
      }
      await to.end();
    };
    // Each side's bytes are charged to its agent and to its client (the caller's IP, the target's).
    const sides = [this.pacers.side(caller, slot.ip), this.pacers.side(target, slot.targetIp)] as const;
    const both = [pump(a, b, sides[0]), pump(b, a, sides[1])].map((p) => p.catch((error: unknown) => close(toAgentError(error, 'UNAVAILABLE'))));
    void Promise.all(both).finally(() => {
      clearInterval(idleCheck);
      closed = true;
      slot.release();
      for (const side of sides) side.release();
    });
  }
}

function add<K>(counts: Map<K, number>, id: K, delta: number): void {
  const n = (counts.get(id) ?? 0) + delta;
  if (n <= 0) counts.delete(id);
  else counts.set(id, n);
}
