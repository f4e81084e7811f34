import { AgentError, toAgentError, type AgentId } from '@agentlink/core';
import { type ChannelStream } from '@agentlink/core/transport';

export interface RelayLimits {
  maxRelaysPerAgent: number;
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

/**
 * The relay: pipes bytes between two agents' tunnels without looking at them (they carry TLS end to end).
 * Limits relays per agent and in all, paces each agent's bytes, and closes relays that stay idle.
 */
export class Relays {
  private readonly perAgent = new Map<AgentId, number>();
  private readonly pacers = new Map<AgentId, BytePacer>();
  private active = 0;
  bytesRelayed = 0;

  constructor(
    private readonly limits: RelayLimits,
    /** Sees every relayed chunk (tests assert it is ciphertext). */
    private readonly tap?: (chunk: Uint8Array) => void,
  ) {}

  get count(): number {
    return this.active;
  }

  /** Checks the limits for a new relay from `caller`; throws RESOURCE_EXHAUSTED when one is hit. */
  admit(caller: AgentId): void {
    if (this.active >= this.limits.maxRelays) throw new AgentError('RESOURCE_EXHAUSTED', `relay full (${this.limits.maxRelays} relays)`);
    if ((this.perAgent.get(caller) ?? 0) >= this.limits.maxRelaysPerAgent) {
      throw new AgentError('RESOURCE_EXHAUSTED', `at most ${this.limits.maxRelaysPerAgent} relays per agent`);
    }
  }

  pipe(caller: AgentId, target: AgentId, a: ChannelStream, b: ChannelStream): void {
    this.active++;
    for (const id of [caller, target]) this.perAgent.set(id, (this.perAgent.get(id) ?? 0) + 1);
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
    const pump = async (from: ChannelStream, to: ChannelStream, payer: AgentId): Promise<void> => {
      const pacer = this.pacer(payer);
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
    const both = [pump(a, b, caller), pump(b, a, target)].map((p) => p.catch((error: unknown) => close(toAgentError(error, 'UNAVAILABLE'))));
    void Promise.all(both).finally(() => {
      clearInterval(idleCheck);
      closed = true;
      this.active--;
      for (const id of [caller, target]) {
        const n = (this.perAgent.get(id) ?? 1) - 1;
        if (n <= 0) {
          this.perAgent.delete(id);
          this.pacers.delete(id);
        } else this.perAgent.set(id, n);
      }
    });
  }

  private pacer(id: AgentId): BytePacer {
    let pacer = this.pacers.get(id);
    if (!pacer) this.pacers.set(id, (pacer = new BytePacer(this.limits.relayBytesPerSecond)));
    return pacer;
  }
}
