import { AgentError, parsePeerReference, toAgentError, type Agent, type AgentId } from '@agentlink/core';
import type { Channel, ChannelStream } from '@agentlink/core/transport';
import type { Discovery, PunchCoordinator, RelayService } from './discovery.js';
import { verifyRecord, type PeerRecord, type SignedRecord } from './record.js';
import type { HostPort } from './stun.js';

interface RendezvousInfo {
  stun: Array<{ host?: string; port: number }>;
  /** A clustered rendezvous lists every live instance's address. */
  instances?: string[];
}

/** Most rendezvous addresses an agent keeps (configured and learned from a cluster): a cluster cannot make it hold more. */
const MAX_RENDEZVOUS = 16;

/**
 * Instances learned from `rdv.info` that one lookup may go on to after failures (beside the addresses the agent
 * was configured with, which it always tries): an honest cluster shares one store, so any live instance answers as
 * the one in use would, and a cluster of three (the deployment described in docs/rendezvous.md) has two others.
 * Each is an address the rendezvous chose, which the agent dials: with every one kept (16), a rendezvous listing a
 * third party's TLS port 15 times had each failed lookup of each agent it serves dial it 15 times.
 */
export const MAX_LEARNED_PER_LOOKUP = 2;

/**
 * STUN servers an agent asks for its mapping, of those `rdv.info` lists: the NAT is classified from two answers
 * (nat-type.ts), and every server listed is sent binding requests at each registration — a rendezvous listing
 * thousands (a third party's address among them) would make every agent it serves send to all of them.
 */
export const MAX_STUN_SERVERS = 2;
/**
 * Entries of `rdv.info`'s instance list read at most (each must be an address; MAX_RENDEZVOUS are kept): the rest
 * of a longer list is not read, not refused (our rendezvous lists every live instance of its cluster).
 */
const MAX_LISTED_INSTANCES = 64;

/** `rdv.info` as the wire gave it, checked: a malformed answer is the rendezvous's fault, a PROTOCOL_ERROR. */
function checkInfo(info: unknown): RendezvousInfo {
  const bad = (what: string): AgentError => new AgentError('PROTOCOL_ERROR', `the rendezvous's rdv.info answer: ${what}`);
  if (typeof info !== 'object' || info === null) throw bad('not a map');
  const { stun, instances } = info as Record<string, unknown>;
  if (!Array.isArray(stun)) throw bad('stun is not a list');
  const servers = stun.slice(0, MAX_STUN_SERVERS).map((server: unknown) => {
    const { host, port } = (typeof server === 'object' && server !== null ? server : {}) as Record<string, unknown>;
    if (!Number.isInteger(port) || (port as number) < 1 || (port as number) > 65_535) throw bad('a STUN port is not a port');
    if (host !== undefined && (typeof host !== 'string' || host.length === 0 || host.length > 255)) throw bad('a STUN host is not a host name');
    return { host: host as string | undefined, port: port as number };
  });
  const listed = Array.isArray(instances) ? instances.slice(0, MAX_LISTED_INSTANCES) : instances;
  if (listed !== undefined && (!Array.isArray(listed) || !listed.every((i) => typeof i === 'string'))) {
    throw bad('instances is not a list of addresses');
  }
  return { stun: servers, instances: listed as string[] | undefined };
}

/**
 * The rendezvous as discovery backend, punch coordinator and relay, over the agent's control channel to it.
 * Given several addresses (instances of one cluster, or independent rendezvous), it registers with one at a
 * time and moves to another when that one fails; lookups try every configured one and a few learned ones
 * (`resolve`). A cluster's instances are learned from `rdv.info`, so an agent configured with one address still
 * fails over to the others; the list is renewed at every registration, so instances that stopped are forgotten.
 */
export class RendezvousClient implements Discovery, PunchCoordinator, RelayService {
  /** Where each kept rendezvous is: the configured ones and those learned from a cluster, MAX_RENDEZVOUS at most. */
  private readonly addresses = new Map<AgentId, string>();
  /** The agent's own, in its order (always kept). */
  private readonly configured: AgentId[] = [];
  /** Learned from a cluster's `rdv.info` or `rdv.route`, oldest first. */
  private learned: AgentId[] = [];
  private current: AgentId;
  private watched: Channel | undefined;
  /** STUN servers of the instance we register with. */
  stunServers: HostPort[] = [];

  constructor(
    private readonly agent: Agent,
    references: readonly string[],
    /** Called when the control channel to the rendezvous we registered with closes (it stopped or failed). */
    private readonly onControlLost: () => void = () => undefined,
    /** The order in which the other rendezvous are tried when the one in use fails (tests pass their own). */
    private readonly random: () => number = Math.random,
  ) {
    if (references.length === 0) throw new AgentError('INVALID_ARGUMENT', 'reach() needs at least one rendezvous address');
    for (const reference of references) {
      const id = this.add(reference);
      if (id !== undefined && !this.configured.includes(id)) this.configured.push(id);
    }
    this.current = this.configured[0]!;
  }

  /** The rendezvous we register with now. */
  get currentId(): AgentId {
    return this.current;
  }

  get relayName(): string {
    return this.host(this.current);
  }

  /** Only the rendezvous may send punch and relay commands. */
  isRendezvous(id: AgentId): boolean {
    return this.addresses.has(id);
  }

  /** Whether `id` is where a channel to the rendezvous goes (the pool must not ask reach() for it). */
  get knownIds(): readonly AgentId[] {
    return [...this.configured, ...this.learned];
  }

  /** Asks for STUN servers (and a cluster's instances) and publishes the record, at the first instance that answers. */
  async publishWith(sign: (stun: HostPort[]) => Promise<SignedRecord>): Promise<AgentId> {
    return this.failover(async (id) => {
      const info = checkInfo(await this.agent.send<unknown>(this.at(id), 'rdv.info', undefined, { timeoutMs: 5000 }).catch((error: unknown) => this.explain(error, id)));
      if (info.instances !== undefined) this.relearn(id, info.instances);
      const servers = info.stun.map((s) => ({ host: s.host ?? this.host(id), port: s.port }));
      const signed = await sign(servers);
      await this.agent.send(this.at(id), 'rdv.register', signed, { timeoutMs: 5000 });
      this.current = id;
      this.stunServers = servers;
      this.watchControlChannel();
      return id;
    });
  }

  async publish(record: SignedRecord): Promise<void> {
    await this.failover(async (id) => {
      await this.agent.send(this.at(id), 'rdv.register', record, { timeoutMs: 5000 });
      this.current = id;
    });
  }

  /**
   * Looks `peer` up at the rendezvous in use, then at each other configured one, and after failures that are not
   * answers at up to MAX_LEARNED_PER_LOOKUP instances learned from `rdv.info`. NOT_FOUND is an answer: an instance
   * of a cluster answers from the store all its instances share, so the others would say the same.
   */
  async resolve(peer: AgentId, signal?: AbortSignal): Promise<PeerRecord> {
    const ask = (id: AgentId) => this.agent.send<SignedRecord>(this.at(id), 'rdv.lookup', { agentId: peer }, { signal, timeoutMs: 5000 });
    const configured = [this.current, ...this.configured.filter((id) => id !== this.current)];
    const learned = this.learned.filter((id) => id !== this.current).slice(0, MAX_LEARNED_PER_LOOKUP);
    let last: unknown;
    let signed: SignedRecord | undefined;
    for (const id of [...configured, ...learned]) {
      if (learned.includes(id) && toAgentError(last).code === 'NOT_FOUND') break;
      try {
        signed = await ask(id);
        break;
      } catch (error) {
        if (signal?.aborted) throw error;
        last = error;
      }
    }
    if (signed === undefined) throw last;
    const record = verifyRecord(signed);
    if (record.agentId !== peer) throw new AgentError('UNAUTHENTICATED', "the rendezvous answered with another agent's record");
    return record;
  }

  requestPunch(peer: AgentId, signal: AbortSignal, timeoutMs: number): Promise<SignedRecord> {
    return this.agent.send<SignedRecord>(this.at(this.currentId), 'rdv.punch', { target: peer }, { signal, timeoutMs });
  }

  /**
   * A relay is opened at the instance holding the peer's control channel (`rdv.route` says which): the caller
   * goes there rather than having instances splice bytes between them (one hop instead of two, and no
   * instance-to-instance links; see docs/rendezvous.md).
   */
  async openRelay(peer: AgentId, signal: AbortSignal): Promise<ChannelStream> {
    let via = this.currentId;
    try {
      const route = await this.agent.send<unknown>(this.at(via), 'rdv.route', { target: peer }, { signal, timeoutMs: 5000 });
      const address = typeof route === 'object' && route !== null ? (route as { address?: unknown }).address : undefined;
      // A malformed answer is the rendezvous's fault (it was a TypeError, or a non-string reached the address parser).
      if (typeof address !== 'string' || address.length > 1024) throw new AgentError('PROTOCOL_ERROR', "the rendezvous's rdv.route answer is not an address");
      via = this.learn(address, { evict: true }) ?? via;
    } catch (error) {
      // A rendezvous of one instance from before clusters has no rdv.route: it holds every control channel.
      if (toAgentError(error).code !== 'NO_HANDLER') throw error;
    }
    const { stream } = await this.agent.openTunnel(this.at(via), 'rdv.relay', { target: peer }, { signal, timeoutMs: 10_000 });
    return stream;
  }

  /** Tells `onControlLost` once the channel we registered over closes. */
  private watchControlChannel(): void {
    const channel = this.agent.channels(this.currentId).find((c) => !c.isClosed);
    if (!channel || channel === this.watched) return;
    this.watched = channel;
    void channel.closed.then(() => {
      if (this.watched === channel) this.onControlLost();
    });
  }

  /**
   * Runs `attempt` at the current instance, then at each other one in a random order, so that the agents of a
   * failed instance spread over the others rather than all moving to the next one listed (after a rolling restart,
   * every agent sat on one instance); throws the last failure.
   */
  private async failover<T>(attempt: (id: AgentId) => Promise<T>): Promise<T> {
    const others = this.knownIds.filter((id) => id !== this.current);
    for (let i = others.length - 1; i > 0; i--) {
      const j = Math.floor(this.random() * (i + 1));
      [others[i], others[j]] = [others[j]!, others[i]!];
    }
    let last: unknown;
    for (const id of [this.current, ...others]) {
      // Forgotten meanwhile: an instance that answered said it is no longer part of the cluster.
      if (!this.addresses.has(id)) continue;
      try {
        return await attempt(id);
      } catch (error) {
        last = error;
      }
    }
    throw last;
  }

  /**
   * A rendezvous that proves another key is almost always a misconfigured address (an AgentId from an earlier
   * start without --key-file): the core error names two keys and nothing else; this one says what to fix.
   */
  private explain(error: unknown, id: AgentId): never {
    const failure = toAgentError(error);
    if (failure.code !== 'UNAUTHENTICATED' || failure.remote || !this.configured.includes(id)) throw error;
    throw new AgentError(
      'UNAUTHENTICATED',
      `rendezvous "${this.addresses.get(id)}": ${failure.message}. Give reach({ rendezvous }) the address the rendezvous printed when it started (without --key-file its AgentId changes at every start)`,
      { cause: error },
    );
  }

  /**
   * The cluster's live instances as `answering` lists them (every instance announces itself every 2 s): learned
   * ones it no longer lists stopped and are forgotten, new ones are learned. Kept for good (until 2026-11-24), the
   * addresses of instances replaced over time (a new key, host or port at each deploy) filled the MAX_RENDEZVOUS
   * places: the agent learned no new instance, so it could not fail over to one, nor open a relay at one.
   */
  private relearn(answering: AgentId, listed: readonly string[]): void {
    const live = new Set<AgentId>();
    for (const reference of listed) {
      try {
        live.add(parsePeerReference(reference).id);
      } catch {
        // learn() below says what is wrong with it
      }
    }
    // A list without the instance answering is not the whole cluster (e.g. Valkey/Redis restarted empty, and the
    // instances have not announced themselves again yet, 2 s at most): nothing is forgotten on its word.
    if (live.has(answering)) {
      live.add(this.current);
      this.learned = this.learned.filter((id) => live.has(id) || (this.addresses.delete(id), false));
    }
    for (const reference of listed) this.learn(reference);
  }

  /**
   * Adds a learned rendezvous address (once, up to MAX_RENDEZVOUS; with `evict`, the oldest learned one other than
   * the current one makes room); returns its AgentId.
   */
  private learn(reference: string, { evict = false } = {}): AgentId | undefined {
    const known = this.knownId(reference);
    const id = this.add(reference, evict ? this.learned.find((l) => l !== this.current) : undefined);
    // New, whether it found a free place or took an evicted one's (the size alone said "not new" then: the id was
    // kept but never renewed nor forgotten, and each such rdv.route answer left one place fewer to learn in).
    if (id !== undefined && !known) this.learned.push(id);
    return id;
  }

  /** Whether `reference` names a rendezvous kept already (a malformed one is for `add` to refuse). */
  private knownId(reference: string): boolean {
    try {
      return this.addresses.has(parsePeerReference(reference).id);
    } catch {
      return false;
    }
  }

  /** Keeps `reference` (once, up to MAX_RENDEZVOUS, forgetting `evictable` to make room); returns its AgentId. */
  private add(reference: string, evictable?: AgentId): AgentId | undefined {
    let id: AgentId;
    try {
      id = parsePeerReference(reference).id;
    } catch (error) {
      throw new AgentError('INVALID_ARGUMENT', `rendezvous address "${reference}": ${(error as Error).message}`);
    }
    if (this.addresses.has(id)) return id;
    if (this.addresses.size >= MAX_RENDEZVOUS) {
      if (evictable === undefined) return undefined;
      this.addresses.delete(evictable);
      this.learned = this.learned.filter((l) => l !== evictable);
    }
    // Not given to core here: each call passes the address (`at`), so core's address book holds the instances the
    // agent calls, not every one a rendezvous lists (fresh ones at each heartbeat pushed the app's peers out of it).
    this.addresses.set(id, reference);
    return id;
  }

  /**
   * How a call reaches rendezvous `id`: by its whole address, so that core learns it again if its address book
   * forgot it (it keeps 16,384 peers, the one dialled longest ago going first, and a control channel that stays up
   * never dials): given once, when first learned, the rendezvous could not be dialled again once the channel dropped.
   */
  private at(id: AgentId): string {
    return this.addresses.get(id) ?? id;
  }

  private host(id: AgentId): string {
    const { url } = parsePeerReference(this.addresses.get(id)!);
    // URL hostnames keep IPv6 literals in brackets; a socket address has none.
    return url ? new URL(url).hostname.replace(/^\[|\]$/g, '') : '127.0.0.1';
  }
}
