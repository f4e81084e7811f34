import { AgentError, type AgentId } from '@agentlink/core';

/**
 * Relayed tunnels other agents opened towards this one (through its rendezvous) that it holds at once: from the
 * acceptance until the relayed channel closes (or its handshake fails). As the rendezvous's own bound on relays
 * towards one agent (`maxRelaysPerTarget`, 128): an honest rendezvous never opens more. Without it, a hostile
 * rendezvous could open one per stream of its control channel (1,024), each a TLS server handshake and then a
 * multiplexed channel this agent serves.
 */
export const MAX_ACCEPTED_RELAYS = 128;

/**
 * TLS server handshakes this agent runs at once for relay tunnels one rendezvous opened: further accepted tunnels
 * wait their turn (at most {@link RELAY_HANDSHAKE_WAIT_MS}). Each handshake signs with the agent's key and
 * verifies the caller's (~3 ms of CPU).
 */
export const MAX_RELAY_HANDSHAKES = 4;

/**
 * Relay handshakes started per second for one rendezvous (a burst of twice as many): at ~3 ms each, a rendezvous
 * opening tunnels without end costs the agent about 6% of a core, not all of it. As the rendezvous's own rate of
 * punch requests towards one agent (`punchesPerSecondPerTarget`, 20/s, burst 40): a peer asks for a relay after
 * (or beside) a punch.
 */
export const RELAY_HANDSHAKES_PER_SECOND = 20;

/** Longest an accepted relay tunnel waits for a handshake turn before it is reset. */
export const RELAY_HANDSHAKE_WAIT_MS = 10_000;

interface Turns {
  running: number;
  /** Handshakes that may start now (a token bucket: RELAY_HANDSHAKES_PER_SECOND, burst twice that). */
  tokens: number;
  updatedAt: number;
  /** Set while waiters wait for the next token. */
  refill: NodeJS.Timeout | undefined;
  waiting: Array<() => void>;
}

const BURST = 2 * RELAY_HANDSHAKES_PER_SECOND;

/**
 * Bounds what relays this agent did not ask for cost it: how many it holds ({@link MAX_ACCEPTED_RELAYS}), and how
 * many of their TLS handshakes run at once ({@link MAX_RELAY_HANDSHAKES}) and start per second
 * ({@link RELAY_HANDSHAKES_PER_SECOND}) per rendezvous. Keyed by rendezvous: only the rendezvous (at most 16
 * addresses, rendezvous-client.ts) may open relays towards an agent.
 */
export class RelayAdmission {
  private held = 0;
  private readonly turns = new Map<AgentId, Turns>();

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Accepted relay tunnels held now. */
  get accepted(): number {
    return this.held;
  }

  /** Handshakes running now for relays from `rendezvous`. */
  handshakesOf(rendezvous: AgentId): number {
    return this.turns.get(rendezvous)?.running ?? 0;
  }

  /** A relay tunnel asks to be accepted: its place, given back once by the function returned; RESOURCE_EXHAUSTED past the bound. */
  admit(): () => void {
    if (this.held >= MAX_ACCEPTED_RELAYS) {
      throw new AgentError('RESOURCE_EXHAUSTED', `this agent holds ${MAX_ACCEPTED_RELAYS} relayed tunnels opened towards it: no more`);
    }
    this.held++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held--;
    };
  }

  /**
   * Waits for a handshake turn of `rendezvous` (one of MAX_RELAY_HANDSHAKES, within the rate); resolves with its
   * release, or rejects with RESOURCE_EXHAUSTED once {@link RELAY_HANDSHAKE_WAIT_MS} passed (or with the signal's
   * reason). Turns are given in arrival order.
   */
  handshakeTurn(rendezvous: AgentId, signal: AbortSignal): Promise<() => void> {
    let own = this.turns.get(rendezvous);
    if (!own) this.turns.set(rendezvous, (own = { running: 0, tokens: BURST, updatedAt: this.now(), refill: undefined, waiting: [] }));
    const turns = own;
    return new Promise((resolve, reject) => {
      const settle = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', abandon);
      };
      const give = (): void => {
        settle();
        resolve(this.releaseOf(turns));
      };
      const leave = (error: AgentError): void => {
        const at = turns.waiting.indexOf(give);
        if (at >= 0) turns.waiting.splice(at, 1);
        settle();
        reject(error);
      };
      const abandon = (): void => leave(signal.reason instanceof AgentError ? signal.reason : new AgentError('CANCELLED', 'relay tunnel given up'));
      const timer = setTimeout(
        () => leave(new AgentError('RESOURCE_EXHAUSTED', `no relay handshake turn within ${RELAY_HANDSHAKE_WAIT_MS} ms`)),
        RELAY_HANDSHAKE_WAIT_MS,
      );
      timer.unref();
      if (signal.aborted) return abandon();
      signal.addEventListener('abort', abandon, { once: true });
      turns.waiting.push(give);
      this.grant(turns);
    });
  }

  /** Gives turns to waiters while handshakes and tokens allow; else wakes up when the next token is due. */
  private grant(turns: Turns): void {
    const now = this.now();
    turns.tokens = Math.min(BURST, turns.tokens + ((now - turns.updatedAt) / 1000) * RELAY_HANDSHAKES_PER_SECOND);
    turns.updatedAt = now;
    while (turns.waiting.length > 0 && turns.running < MAX_RELAY_HANDSHAKES) {
      if (turns.tokens < 1) {
        if (turns.refill === undefined) {
          const ms = Math.ceil(((1 - turns.tokens) / RELAY_HANDSHAKES_PER_SECOND) * 1000);
          turns.refill = setTimeout(() => {
            turns.refill = undefined;
            this.grant(turns);
          }, ms);
          turns.refill.unref();
        }
        return;
      }
      turns.tokens--;
      turns.running++;
      turns.waiting.shift()!();
    }
  }

  private releaseOf(turns: Turns): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      turns.running--;
      this.grant(turns);
    };
  }
}
