import { networkInterfaces } from 'node:os';
import type { NatType } from './record.js';
import type { HostPort, StunClient } from './stun.js';

export interface NatDiscovery {
  type: NatType;
  /** Our public address and port as the first STUN server saw them. */
  mapped: HostPort | undefined;
  /** Port step between the two mappings (symmetric NATs): used for port prediction. */
  portDelta: number;
}

/**
 * Classifies the NAT by mapping behaviour (RFC 4787): the same socket asks two STUN servers (two ports, or two
 * addresses) for its mapping. No mapping change and our own address → no NAT; same mapping for both → cone
 * (endpoint-independent); different → symmetric. Filtering is not observable this way; port-restricted and
 * full cone both report `cone`, and punching treats them alike.
 */
export async function discoverNat(client: StunClient, servers: readonly HostPort[], localPort: number): Promise<NatDiscovery> {
  const answers = await Promise.all(servers.map((server) => client.binding(server).catch(() => undefined)));
  const [first, second] = answers;
  if (!first) return { type: 'unknown', mapped: undefined, portDelta: 0 };
  if (isLocalAddress(first.host) && first.port === localPort) return { type: 'none', mapped: first, portDelta: 0 };
  if (!second) return { type: 'unknown', mapped: first, portDelta: 0 };
  if (second.host === first.host && second.port === first.port) return { type: 'cone', mapped: first, portDelta: 0 };
  return { type: 'symmetric', mapped: first, portDelta: second.port - first.port };
}

/**
 * Registrations in a row whose STUN got no answer at all that may still publish the mapping learned before. An agent
 * that moved to a network where STUN goes unanswered would otherwise publish its old network's mapping for as long
 * as it runs, each heartbeat renewing it, and its peers punch to an address that is no longer its own. Two: at the
 * default 15 s heartbeat, the old mapping is published for at most 30 s after the last answer, and the last record
 * carrying it expires 45 s later; two lost rounds in a row are what a fleet behind one address over the STUN rate
 * meets (docs/security.md).
 */
export const MAX_UNANSWERED_KEPT = 2;

/**
 * What a registration publishes after its STUN went (partly) unanswered: the type and mapping learned before, while
 * the answers that did come say nothing else (no answer, or the same mapping). STUN datagrams get lost, and a fleet
 * behind one address shares the rendezvous' per-IP STUN rate: until 2026-11-25 every heartbeat whose requests it
 * dropped re-registered the agent as `unknown` without its public mapping (its peers could no longer punch to it)
 * until a later heartbeat got answers. A different mapping is news: it is published (as `unknown`, one answer
 * cannot classify the NAT). `unansweredBefore`: the registrations just before this one whose STUN got no answer at
 * all; past `MAX_UNANSWERED_KEPT` of them, no answer publishes `unknown` (the old mapping may be stale).
 */
export function settleDiscovery(previous: NatDiscovery | undefined, found: NatDiscovery, unansweredBefore = 0): { discovery: NatDiscovery; kept: boolean } {
  if (found.type !== 'unknown' || previous === undefined || previous.type === 'unknown') return { discovery: found, kept: false };
  if (found.mapped === undefined && unansweredBefore >= MAX_UNANSWERED_KEPT) return { discovery: found, kept: false };
  const sameMapping = found.mapped === undefined || (found.mapped.host === previous.mapped?.host && found.mapped.port === previous.mapped.port);
  return sameMapping ? { discovery: previous, kept: true } : { discovery: found, kept: false };
}

/** IPv4 addresses of this host's interfaces (LAN candidates), loopback excluded unless it is all there is. */
export function localAddresses(): string[] {
  const all = Object.values(networkInterfaces()).flatMap((list) => list ?? []);
  const v4 = all.filter((i) => i.family === 'IPv4');
  const external = v4.filter((i) => !i.internal).map((i) => i.address);
  return external.length > 0 ? external : v4.map((i) => i.address);
}

function isLocalAddress(address: string): boolean {
  return Object.values(networkInterfaces()).some((list) => list?.some((i) => i.address === address));
}
