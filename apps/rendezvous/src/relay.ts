import { AgentError, toAgentError, type AgentId } from '@agentlink/core';
import { type ChannelStream } from '@agentlink/core/transport';

export interface RelayLimits {
  maxRelaysPerAgent: number;
  maxRelaysPerTarget: number;
  maxRelaysPerIp: number;
  maxRelays: number;
  relayBytesPerSecond: number;
  relayIdleMs: number;
}

/** Paces one agent's relayed bytes to a rate (a token bucket counted in bytes, one second of burst). */
class BytePacer {
  private allowance: number;
  private updatedAt = performance.now();

  constructor(private readonly bytesPerSecond: number) {
    this.allowance = bytesPerSecond;
  }

  /** Milliseconds to wait before sending `bytes`. */
  take(bytes: number): number {
    const now = performance.now();
    this.allowance = Math.min(this.bytesPerSecond, this.allowance + ((now - this.updatedAt) / 1000) * this.bytesPerSecond);
    this.updatedAt = now;
    this.allowance -= bytes;
    return this.allowance >= 0 ? 0 : (-this.allowance / this.bytesPerSecond) * 1000;
  }
}

/** A relay's place in the limits, taken before its tunnel to the target is opened; given back once. */
export interface RelaySlot {
  readonly caller: AgentId;
  readonly target: AgentId;
  /** The IP the caller asked from. */
  readonly ip: string;
  release(): void;
}

/**
 * The relay: pipes bytes between two agents' tunnels without looking at them (they carry TLS end to end).
 * Limits relays per caller, per target, per caller IP and in all, paces each agent's bytes, and closes relays that stay idle.
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
  /** Each agent's byte pacer, kept while it is in a relay (either side). */
  private readonly pacers = new Map<AgentId, { pacer: BytePacer; relays: number }>();
  private active = 0;
  bytesRelayed = 0;

  constructor(
    private readonly limits: RelayLimits,
    /** Sees every relayed chunk (tests assert it is ciphertext). */
    private readonly tap?: (chunk: Uint8Array) => void,
  ) {}

  /** Relays held now (open, or admitted and opening). */
  get count(): number {
    return this.active;
  }

  /** Takes a place for a new relay from `caller` (at `ip`) to `target`; throws RESOURCE_EXHAUSTED when a limit is hit. */
  admit(caller: AgentId, target: AgentId, ip: string): RelaySlot {
    if (this.active >= this.limits.maxRelays) throw new AgentError('RESOURCE_EXHAUSTED', `relay full (${this.limits.maxRelays} relays)`);
    if ((this.opened.get(caller) ?? 0) >= this.limits.maxRelaysPerAgent) {
      throw new AgentError('RESOURCE_EXHAUSTED', `at most ${this.limits.maxRelaysPerAgent} relays per agent`);
    }
    if ((this.towards.get(target) ?? 0) >= this.limits.maxRelaysPerTarget) {
      throw new AgentError('RESOURCE_EXHAUSTED', `at most ${this.limits.maxRelaysPerTarget} relays towards one agent`);
    }
    if ((this.fromIp.get(ip) ?? 0) >= this.limits.maxRelaysPerIp) {
      throw new AgentError('RESOURCE_EXHAUSTED', `at most ${this.limits.maxRelaysPerIp} relays from one address`);
    }
    this.active++;
    add(this.opened, caller, 1);
    add(this.towards, target, 1);
    add(this.fromIp, ip, 1);
    let released = false;
    return {
      caller,
      target,
      ip,
      release: () => {
        if (released) return;
        released = true;
        this.active--;
        add(this.opened, caller, -1);
        add(this.towards, target, -1);
        add(this.fromIp, ip, -1);
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
    const pump = async (from: ChannelStream, to: ChannelStream, pacer: BytePacer): Promise<void> => {
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
    const both = [pump(a, b, this.pacer(caller)), pump(b, a, this.pacer(target))].map((p) => p.catch((error: unknown) => close(toAgentError(error, 'UNAVAILABLE'))));
    void Promise.all(both).finally(() => {
      clearInterval(idleCheck);
      closed = true;
      slot.release();
      for (const id of [caller, target]) {
        const entry = this.pacers.get(id);
        if (entry && --entry.relays <= 0) this.pacers.delete(id);
      }
    });
  }

  /** `id`'s pacer, counted once more as in use (one per side of each relay it is in). */
  private pacer(id: AgentId): BytePacer {
    let entry = this.pacers.get(id);
    if (!entry) this.pacers.set(id, (entry = { pacer: new BytePacer(this.limits.relayBytesPerSecond), relays: 0 }));
    entry.relays++;
    return entry.pacer;
  }
}

function add<K>(counts: Map<K, number>, id: K, delta: number): void {
  const n = (counts.get(id) ?? 0) + delta;
  if (n <= 0) counts.delete(id);
  else counts.set(id, n);
}
