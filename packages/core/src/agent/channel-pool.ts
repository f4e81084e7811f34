import { setMaxListeners } from 'node:events';
import { AgentError } from '../errors.js';
import { retiredClose } from '../retired-close.js';
import type { Channel, ChannelPath } from '../channel.js';
import { diagnosticChannels } from '../diagnostics.js';
import type { AgentId } from '../identity/agent-id.js';
import { WeightedPriorityQueue } from '../scheduler/priority-queue.js';
import { integerInRange, MAX_TIMER_MS, nonNegativeInteger, positiveInteger } from '../util/options.js';
import { PRIORITIES, type Priority } from '../wire/messages.js';
import type { PeerDialer } from './peer-dialer.js';

/** Limits of the channel pool: channels per peer, concurrent calls per channel, idle time, queue sizes. */
export interface PoolLimits {
  /** Calls one channel carries at once before the pool opens another or queues (default 128). */
  maxCallsPerChannel?: number;
  /** Channels to one peer (default 4): more are opened only while calls queue for capacity. */
  maxChannelsPerPeer?: number;
  /** Channels to a peer that idle closing keeps (default 0). */
  minChannelsPerPeer?: number;
  /** Channels in all (default 4096): at the limit the least recently used idle one is closed first. */
  maxChannels?: number;
  /** Calls waiting for capacity, across peers (default 10,000); beyond it calls fail with RESOURCE_EXHAUSTED. */
  maxPendingCalls?: number;
  /** Channels without calls for this long are closed (default 5 min; 0 = never). */
  idleTimeoutMs?: number;
  /** Every channel is pinged this often; RTT is recorded, and one that does not answer is closed (default 30 s; 0 = off). */
  healthCheckIntervalMs?: number;
}

export interface ChannelPoolOptions extends PoolLimits {
  dialer: PeerDialer;
  self: AgentId;
  /** Round trip over `channel` in milliseconds (the agent's ping). */
  ping(channel: Channel, timeoutMs: number): Promise<number>;
}

/** One pooled channel as {@link Agent.stats} reports it. */
export interface ChannelStats {
  peer: AgentId;
  kind: string;
  path: ChannelPath;
  initiator: 'local' | 'remote';
  calls: number;
  rttMs: number | undefined;
}

/** The pool as {@link Agent.stats} reports it: channels, calls in flight, calls queued. */
export interface PoolStats {
  channels: ChannelStats[];
  channelsByKind: Record<string, number>;
  pendingCalls: Record<Priority, number>;
}

interface ChannelState {
  calls: number;
  /**
   * When the channel was last used, as a count of uses in this pool (not a clock): eviction only needs the order,
   * and a clock read on every call's end and every served stream cost a `Date.now` each (a runtime call in V8).
   */
  lastUsed: number;
  idleSince: number | undefined;
  retired: boolean;
  /** Retire checks in a row that found the retired channel without calls, streams or a use since the last one. */
  quietChecks: number;
  /** `lastUsed` at the last retire check: a stream that opened and ended between two checks changed it. */
  usedAtCheck: number;
  /** A crossed dial's retired channel that the peer dialled: the peer closes it, never this side (settleCrossedDials). */
  peerCloses: boolean;
  rttMs: number | undefined;
}

interface Waiter {
  priority: Priority;
  settled: boolean;
  resolve(channel: Channel): void;
  reject(error: AgentError): void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

class PeerState {
  readonly channels = new Set<Channel>();
  readonly queue = new WeightedPriorityQueue<Waiter>((w) => !w.settled);
  dialing: Promise<void> | undefined;
}

const DEFAULTS = {
  maxCallsPerChannel: 128,
  maxChannelsPerPeer: 4,
  minChannelsPerPeer: 0,
  maxChannels: 4096,
  maxPendingCalls: 10_000,
  idleTimeoutMs: 5 * 60_000,
  healthCheckIntervalMs: 30_000,
};
/** Ranks any direct channel with room above every relayed one. */
const RELAY_PENALTY = 2 ** 30;
/** How often a retired channel is checked for having no streams left. */
const RETIRE_CHECK_MS = 200;
/**
 * How long a retired channel stays free of calls and streams before its closer closes it (at least; longer on a
 * path whose round trip is known to be long): every reply it finished on it has long been delivered by then —
 * QUIC's close drops stream data the peer has not acknowledged — and the peer's calls started on it before it
 * learned of the retirement have mostly arrived and been served. Those still in flight are failed by the close's
 * code as unprocessed, and resent on the kept channel (docs/protocol.md "Retired channels").
 */
const RETIRE_QUIET_MS = 2_000;
/** The quiet period, as a number of round trips, on a path whose round trip the health checks measured. */
const RETIRE_QUIET_RTTS = 8;
const RETIRED_REASON = 'retired: another channel to the peer took over (crossed dial or a direct path)';

/** How long a channel must have carried nothing before a close may tell the peer "unprocessed" (see above). */
function quietPeriodOf(state: ChannelState): number {
  return Math.max(RETIRE_QUIET_MS, RETIRE_QUIET_RTTS * (state.rttMs ?? 0));
}

/**
 * The channels an agent has, per peer, and the calls waiting for room on them. A call reserves a slot on a
 * channel and releases it when it ends; when every channel to the peer is full the call waits in the peer's
 * weighted priority queue, and the pool opens another channel if the limits allow. Concurrent calls to a peer
 * with no channel share one dial.
 */
export class ChannelPool {
  private readonly limits: Required<PoolLimits>;
  private readonly peers = new Map<AgentId, PeerState>();
  private readonly state = new Map<Channel, ChannelState>();
  private readonly pendingByPriority: Record<Priority, number> = { critical: 0, high: 0, normal: 0, low: 0 };
  private pending = 0;
  /** Uses so far (ChannelState.lastUsed): the least recently used channel is the one with the smallest count. */
  private uses = 0;
  private readonly closing = new AbortController();
  private retireTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private healthTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: ChannelPoolOptions) {
    setMaxListeners(0, this.closing.signal); // every dial in flight listens to it
    this.limits = {
      maxCallsPerChannel: positiveInteger('maxCallsPerChannel', options.maxCallsPerChannel, DEFAULTS.maxCallsPerChannel),
      maxChannelsPerPeer: positiveInteger('maxChannelsPerPeer', options.maxChannelsPerPeer, DEFAULTS.maxChannelsPerPeer),
      minChannelsPerPeer: nonNegativeInteger('minChannelsPerPeer', options.minChannelsPerPeer, DEFAULTS.minChannelsPerPeer),
      maxChannels: positiveInteger('maxChannels', options.maxChannels, DEFAULTS.maxChannels),
      maxPendingCalls: nonNegativeInteger('maxPendingCalls', options.maxPendingCalls, DEFAULTS.maxPendingCalls),
      // Timer periods: above node's longest delay an interval would run every millisecond (a health check of every channel).
      idleTimeoutMs: integerInRange('idleTimeoutMs', options.idleTimeoutMs, DEFAULTS.idleTimeoutMs, 0, MAX_TIMER_MS),
      healthCheckIntervalMs: integerInRange('healthCheckIntervalMs', options.healthCheckIntervalMs, DEFAULTS.healthCheckIntervalMs, 0, MAX_TIMER_MS),
    };
    if (this.limits.minChannelsPerPeer > this.limits.maxChannelsPerPeer) {
      throw new AgentError('INVALID_ARGUMENT', `minChannelsPerPeer (${this.limits.minChannelsPerPeer}) must not exceed maxChannelsPerPeer (${this.limits.maxChannelsPerPeer})`);
    }
  }

  /** A slot on an open channel to `peer` if one is free and no call waits for one: the per-call fast path. */
  tryReserve(peer: AgentId): Channel | undefined {
    const peerState = this.peers.get(peer);
    if (!peerState || peerState.queue.size > 0) return undefined;
    const channel = this.freeChannel(peerState);
    if (channel) this.take(channel);
    return channel;
  }

  /** A slot on a channel to `peer`: at once when one is free, else after the calls queued ahead by priority. */
  reserve(peer: AgentId, priority: Priority, signal: AbortSignal | undefined): Promise<Channel> {
    const fast = this.tryReserve(peer);
    if (fast) return Promise.resolve(fast);
    if (this.closing.signal.aborted) return Promise.reject(this.closing.signal.reason as AgentError);
    if (signal?.aborted) return Promise.reject(signal.reason as AgentError);
    if (this.pending >= this.limits.maxPendingCalls) {
      return Promise.reject(
        new AgentError('RESOURCE_EXHAUSTED', `${this.pending} calls already wait for a channel (maxPendingCalls ${this.limits.maxPendingCalls})`),
      );
    }
    const peerState = this.peerState(peer);
    const promise = new Promise<Channel>((resolve, reject) => {
      const waiter: Waiter = { priority, settled: false, resolve, reject, signal, onAbort: undefined };
      if (signal) {
        waiter.onAbort = () => this.settle(waiter)?.reject(signal.reason as AgentError);
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      peerState.queue.push(waiter, priority);
      this.pending++;
      this.pendingByPriority[priority]++;
    });
    this.grow(peer, peerState);
    return promise;
  }

  /** The call on `channel` ended: its slot goes to the next queued call, if any. */
  release(channel: Channel): void {
    const state = this.state.get(channel);
    if (!state) return;
    state.calls--;
    state.lastUsed = ++this.uses;
    const peerState = this.peers.get(channel.peer);
    if (peerState && peerState.queue.size > 0) this.serveQueue(peerState);
  }

  /** A peer opened a stream on `channel`: it is in use. */
  touch(channel: Channel): void {
    const state = this.state.get(channel);
    if (state) {
      state.idleSince = undefined;
      state.lastUsed = ++this.uses;
    }
  }

  add(channel: Channel): void {
    if (this.closing.signal.aborted) {
      void channel.close(this.closing.signal.reason as AgentError);
      return;
    }
    const peerState = this.peerState(channel.peer);
    peerState.channels.add(channel);
    this.state.set(channel, { calls: 0, lastUsed: ++this.uses, idleSince: undefined, retired: false, quietChecks: 0, usedAtCheck: 0, peerCloses: false, rttMs: undefined });
    if (diagnosticChannels.channelOpen.hasSubscribers) diagnosticChannels.channelOpen.publish({ channel });
    void channel.closed.then((reason) => this.removed(channel, peerState, reason));
    this.settleCrossedDials(channel, peerState);
    if (channel.path !== 'relay') this.retireRelays(peerState);
    this.startTimers();
    this.serveQueue(peerState);
  }

  /** The channel a new call to `peer` would take now, if any is open. */
  preferred(peer: AgentId): Channel | undefined {
    const peerState = this.peers.get(peer);
    return peerState && this.freeChannel(peerState);
  }

  list(peer?: AgentId): Channel[] {
    if (peer !== undefined) return [...(this.peers.get(peer)?.channels ?? [])];
    return [...this.state.keys()];
  }

  stats(): PoolStats {
    const channelsByKind: Record<string, number> = {};
    const channels: ChannelStats[] = [];
    for (const [channel, state] of this.state) {
      channelsByKind[channel.kind] = (channelsByKind[channel.kind] ?? 0) + 1;
      channels.push({ peer: channel.peer, kind: channel.kind, path: channel.path ?? 'direct', initiator: channel.initiator, calls: state.calls, rttMs: state.rttMs });
    }
    return { channels, channelsByKind, pendingCalls: { ...this.pendingByPriority } };
  }

  async close(reason: AgentError): Promise<void> {
    this.closing.abort(reason);
    clearInterval(this.retireTimer);
    clearInterval(this.idleTimer);
    clearInterval(this.healthTimer);
    for (const peerState of this.peers.values()) {
      for (let w = peerState.queue.shift(); w; w = peerState.queue.shift()) this.settle(w)?.reject(reason);
    }
    const all = this.list();
    await Promise.all(all.map((channel) => channel.close(reason)));
    await Promise.all(all.map((channel) => channel.closed));
  }

  // ---- capacity ------------------------------------------------------------------------------------------

  private peerState(peer: AgentId): PeerState {
    let peerState = this.peers.get(peer);
    if (!peerState) this.peers.set(peer, (peerState = new PeerState()));
    return peerState;
  }

  private capacity(channel: Channel): number {
    return Math.min(this.limits.maxCallsPerChannel, channel.streamLimit ?? Number.POSITIVE_INFINITY);
  }

  /** The usable channel with the most free slots, if any has one; a relayed one only when no other has room. */
  private freeChannel(peerState: PeerState): Channel | undefined {
    let best: Channel | undefined;
    let bestScore = 0;
    for (const channel of peerState.channels) {
      const state = this.state.get(channel)!;
      if (channel.isClosed || state.retired) continue;
      const free = this.capacity(channel) - state.calls;
      const score = free <= 0 ? 0 : channel.path === 'relay' ? free : free + RELAY_PENALTY;
      if (score > bestScore) {
        best = channel;
        bestScore = score;
      }
    }
    return best;
  }

  private take(channel: Channel): void {
    const state = this.state.get(channel)!;
    state.calls++;
    state.idleSince = undefined;
  }

  private settle(waiter: Waiter): Waiter | undefined {
    if (waiter.settled) return undefined;
    waiter.settled = true;
    this.pending--;
    this.pendingByPriority[waiter.priority]--;
    if (waiter.onAbort) waiter.signal!.removeEventListener('abort', waiter.onAbort);
    return waiter;
  }

  private serveQueue(peerState: PeerState): void {
    while (peerState.queue.size > 0) {
      const channel = this.freeChannel(peerState);
      if (!channel) return;
      const waiter = peerState.queue.shift();
      if (!waiter) return;
      this.take(channel);
      this.settle(waiter)!.resolve(channel);
    }
  }

  private usableCount(peerState: PeerState): number {
    let n = 0;
    for (const channel of peerState.channels) if (!channel.isClosed && !this.state.get(channel)!.retired) n++;
    return n;
  }

  /** Calls wait on `peer`: dial a channel if it has none, or another one if every one is full and limits allow. */
  private grow(peer: AgentId, peerState: PeerState): void {
    if (peerState.dialing || this.closing.signal.aborted) return;
    const usable = this.usableCount(peerState);
    if (usable > 0 && (usable >= this.limits.maxChannelsPerPeer || !this.options.dialer.canDial(peer))) return;
    if (this.state.size >= this.limits.maxChannels && !this.evictIdle()) {
      if (usable > 0) return; // the peer has channels: its calls wait for slots
      this.failQueue(peerState, new AgentError('RESOURCE_EXHAUSTED', `channel limit reached (maxChannels ${this.limits.maxChannels}) and none is idle`));
      return;
    }
    peerState.dialing = this.options.dialer.dial(peer, this.closing.signal).then(
      (channel) => {
        peerState.dialing = undefined;
        this.add(channel);
        if (peerState.queue.size > 0) this.grow(peer, peerState);
      },
      (error: AgentError) => {
        peerState.dialing = undefined;
        // With no channel to the peer the queued calls cannot run: fail them now rather than at their deadline.
        if (this.usableCount(peerState) === 0) this.failQueue(peerState, error);
      },
    );
  }

  private failQueue(peerState: PeerState, error: AgentError): void {
    for (let w = peerState.queue.shift(); w; w = peerState.queue.shift()) this.settle(w)?.reject(error);
  }

  /** Closes the least recently used channel without calls or streams; false when there is none. */
  private evictIdle(): boolean {
    let oldest: Channel | undefined;
    let oldestUse = Number.POSITIVE_INFINITY;
    for (const [channel, state] of this.state) {
      if (state.calls === 0 && channel.activeStreams === 0 && state.lastUsed < oldestUse) {
        oldest = channel;
        oldestUse = state.lastUsed;
      }
    }
    if (!oldest) return false;
    void oldest.close(new AgentError('CLOSED', `closed to make room (maxChannels ${this.limits.maxChannels})`));
    this.forget(oldest);
    return true;
  }

  private removed(channel: Channel, peerState: PeerState, reason: AgentError): void {
    this.forget(channel);
    if (reason.code === 'PERMISSION_DENIED' && channel.initiator === 'local') this.undoCrossedDial(channel, peerState);
    if (diagnosticChannels.channelClose.hasSubscribers) diagnosticChannels.channelClose.publish({ channel, reason });
    if (peerState.queue.size > 0) this.grow(channel.peer, peerState);
    else if (peerState.channels.size === 0 && !peerState.dialing && this.peers.get(channel.peer) === peerState) this.peers.delete(channel.peer);
  }

  private forget(channel: Channel): void {
    this.state.delete(channel);
    this.peers.get(channel.peer)?.channels.delete(channel);
  }

  // ---- upkeep --------------------------------------------------------------------------------------------

  /**
   * Two agents that dial each other at once (a hole punch does this on purpose) end up with two channels of the
   * same kind, one dialled by each. Both sides keep the one the lower AgentId dialled, so they agree without a
   * message; the other serves the calls already on it and is closed when it has none.
   *
   * Only its dialler closes it: the dialler retires it once the kept channel reached its own pool, and from then
   * on opens no stream on it. The other side may retire it earlier (its own dial landed first) while the dialler
   * still rides it — e.g. its connection gate is still deciding on the kept channel — and a close from there cut
   * the dialler's calls in flight (QUIC: 42 calls in 30 crossed dials under a 300 ms gate) and made it dial again.
   */
  private settleCrossedDials(added: Channel, peerState: PeerState): void {
    const dialler = (c: Channel): AgentId => (c.initiator === 'local' ? this.options.self : c.peer);
    for (const other of peerState.channels) {
      if (other === added || other.kind !== added.kind || other.initiator === added.initiator) continue;
      if (other.isClosed || this.state.get(other)!.retired) continue;
      const loser = dialler(added) < dialler(other) ? other : added;
      this.retire(loser);
      this.state.get(loser)!.peerCloses = loser.initiator === 'remote';
      return;
    }
  }

  /**
   * The peer's gate refused our dial (`refused`, closed with PERMISSION_DENIED): the peer never took it into its
   * pool, so it never retires its own dial of the crossing, which is its working channel to us and which we
   * retired for ours. Nobody would close it (only its dialler does) or call on it from here until the idle
   * timeout, and each of our calls dialled again to be refused again. The crossing is undone: the peer's dial is
   * our channel to it, as if it alone had dialled.
   */
  private undoCrossedDial(refused: Channel, peerState: PeerState): void {
    for (const other of peerState.channels) {
      const state = this.state.get(other)!;
      if (other.kind !== refused.kind || !state.peerCloses || other.isClosed) continue;
      state.retired = false;
      state.peerCloses = false;
    }
    this.serveQueue(peerState); // calls waiting for a channel take it rather than dial again
  }

  /** A direct path came up: new calls take it, and relayed channels close once their calls have finished. */
  private retireRelays(peerState: PeerState): void {
    for (const channel of peerState.channels) if (channel.path === 'relay' && !channel.isClosed) this.retire(channel);
  }

  private retire(channel: Channel): void {
    const state = this.state.get(channel)!;
    state.retired = true;
    state.quietChecks = 0;
    state.usedAtCheck = state.lastUsed;
    this.retireTimer ??= setInterval(() => this.closeRetired(), RETIRE_CHECK_MS).unref();
  }

  /**
   * Closes the retired channels this side closes once they have been quiet (no call, no stream, no use) for the
   * quiet period, with the retired close: the peer may have opened a call on one before it learned of the
   * retirement; what we did not answer we never processed (the channel takes no stream once closing), so the
   * peer resends it on the kept channel rather than failing it.
   */
  private closeRetired(): void {
    let retired = 0;
    for (const [channel, state] of this.state) {
      if (!state.retired) continue;
      retired++;
      if (state.peerCloses || channel.isClosed) continue;
      if (state.calls > 0 || state.lastUsed !== state.usedAtCheck || channel.activeStreams > 0) {
        state.quietChecks = 0;
        state.usedAtCheck = state.lastUsed;
        continue;
      }
      if (++state.quietChecks * RETIRE_CHECK_MS >= quietPeriodOf(state)) void channel.close(retiredClose(RETIRED_REASON));
    }
    if (retired === 0) {
      clearInterval(this.retireTimer);
      this.retireTimer = undefined;
    }
  }

  private startTimers(): void {
    const { idleTimeoutMs, healthCheckIntervalMs } = this.limits;
    if (idleTimeoutMs > 0 && !this.idleTimer) {
      this.idleTimer = setInterval(() => this.closeIdle(idleTimeoutMs), Math.max(10, idleTimeoutMs / 4)).unref();
    }
    if (healthCheckIntervalMs > 0 && !this.healthTimer) {
      this.healthTimer = setInterval(() => this.checkHealth(healthCheckIntervalMs), healthCheckIntervalMs).unref();
    }
  }

  /**
   * Closes channels that carried no call for idleTimeoutMs: one is idle from the first check that finds it
   * without streams and without a stream started since (checks run every quarter of the timeout). A call of the
   * peer's may cross the close on the wire: once the channel was idle for a retired channel's quiet period, the
   * close carries the retired close code (docs/protocol.md "Retired channels"), so the peer resends that call
   * rather than failing it; a shorter timeout (a setting) closes plainly, and leaves a retired channel we close
   * to its own quiet period.
   */
  private closeIdle(idleTimeoutMs: number): void {
    const now = Date.now();
    for (const [channel, state] of this.state) {
      if (channel.activeStreams > 0 || state.calls > 0) {
        state.idleSince = undefined;
        continue;
      }
      if (state.idleSince === undefined) state.idleSince = now;
      else if (now - state.idleSince >= idleTimeoutMs) {
        const peerState = this.peers.get(channel.peer);
        if (peerState && this.usableCount(peerState) <= this.limits.minChannelsPerPeer && !state.retired) continue;
        const quiet = idleTimeoutMs >= quietPeriodOf(state);
        if (!quiet && state.retired && !state.peerCloses) continue;
        this.forget(channel);
        const reason = `idle for ${idleTimeoutMs} ms`;
        void channel.close(quiet ? retiredClose(reason) : new AgentError('CLOSED', reason));
      }
    }
  }

  /** Pings every channel; a channel that does not answer within the interval is closed as UNAVAILABLE. */
  private checkHealth(timeoutMs: number): void {
    for (const [channel, state] of this.state) {
      if (channel.isClosed) continue;
      this.options.ping(channel, timeoutMs).then(
        (rtt) => (state.rttMs = rtt),
        (error: AgentError) => {
          if (!channel.isClosed && !this.closing.signal.aborted) {
            void channel.close(new AgentError('UNAVAILABLE', `health check failed: ${error.message}`));
          }
        },
      );
    }
  }
}
