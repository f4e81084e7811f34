import { AgentError } from '../errors.js';
import { parseAgentId, type AgentId } from '../identity/agent-id.js';

/**
 * Where to reach a peer: `<AgentId>@<url>`, e.g. `kq3…@wss://10.0.0.5:4433/agentlink`. A bare AgentId is also a
 * peer reference when its addresses are already known (added earlier, or the peer connected to us).
 */
export interface PeerReference {
  id: AgentId;
  url: URL | undefined;
}

/** Splits `<AgentId>@<url>` (or a bare AgentId) into its parts; an INVALID_ARGUMENT AgentError otherwise. */
export function parsePeerReference(text: string): PeerReference {
  const at = text.indexOf('@');
  const id = peerId(text, at < 0 ? text : text.slice(0, at));
  if (at < 0) return { id, url: undefined };
  let url: URL;
  try {
    url = new URL(text.slice(at + 1));
  } catch {
    throw new AgentError('INVALID_ARGUMENT', `"${text.slice(at + 1)}" is not a URL (expected e.g. wss://host:port)`);
  }
  return { id, url };
}

/** The AgentId part of a peer reference; a wrong one says what a peer reference looks like. */
function peerId(text: string, id: string): AgentId {
  try {
    return parseAgentId(id);
  } catch (error) {
    const shown = text.length > 80 ? `${text.slice(0, 80)}…` : text;
    throw new AgentError(
      'INVALID_ARGUMENT',
      `peer "${shown}": ${(error as Error).message}; call a peer as "<AgentId>" or "<AgentId>@<url>" (its agent.id, or one of its agent.addresses)`,
    );
  }
}

/** The address `<AgentId>@<url>` other agents dial. */
export function formatPeerAddress(id: AgentId, url: string): string {
  return `${id}@${url}`;
}

/** URLs kept per peer, most recently learned first: a dial races them all, so older ones are dropped. */
export const MAX_URLS_PER_PEER = 16;
/** Peers whose URLs are kept; past it, the one learned or dialled longest ago is forgotten. */
export const MAX_KNOWN_PEERS = 16_384;

/**
 * Known URLs per peer, most recently learned first. Bounded both ways, because what fills it is not all the
 * user's own: `@agentlink/nat` adds every rendezvous instance a rendezvous names (a cluster's, across deploys
 * that replace them), and an app that calls peers by `<AgentId>@<url>` adds one entry per peer it ever called.
 * A forgotten peer is dialled again once its address is given again (or through a plugin such as `reach()`).
 */
export class AddressBook {
  private readonly urls = new Map<AgentId, string[]>();

  constructor(
    private readonly maxPeers = MAX_KNOWN_PEERS,
    private readonly maxUrlsPerPeer = MAX_URLS_PER_PEER,
  ) {}

  add(id: AgentId, url: URL): void {
    const text = url.href;
    const list = (this.urls.get(id) ?? []).filter((u) => u !== text);
    list.unshift(text);
    if (list.length > this.maxUrlsPerPeer) list.length = this.maxUrlsPerPeer;
    this.urls.delete(id); // re-inserted last: the Map's order is the order of last use
    this.urls.set(id, list);
    if (this.urls.size > this.maxPeers) this.urls.delete(this.urls.keys().next().value!);
  }

  get(id: AgentId): URL[] {
    const list = this.urls.get(id);
    if (!list) return [];
    this.urls.delete(id);
    this.urls.set(id, list);
    return list.map((u) => new URL(u));
  }

  /** Whether any URL is known for the peer (no allocation: the pool asks on its way to every dial). */
  has(id: AgentId): boolean {
    return this.urls.has(id);
  }

  /** Peers whose URLs are kept (for tests and diagnostics). */
  get size(): number {
    return this.urls.size;
  }
}
