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

/** Known URLs per peer, most recently learned first. */
export class AddressBook {
  private readonly urls = new Map<AgentId, string[]>();

  add(id: AgentId, url: URL): void {
    const text = url.href;
    const list = (this.urls.get(id) ?? []).filter((u) => u !== text);
    list.unshift(text);
    this.urls.set(id, list);
  }

  get(id: AgentId): URL[] {
    return (this.urls.get(id) ?? []).map((u) => new URL(u));
  }
}
