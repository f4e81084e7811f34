import { afterEach, describe, expect, it } from 'vitest';
import { Identity, createAgent, type Agent, type AgentId } from '../src/index.js';
import type { ListenContext } from '../src/transport.js';
import { randomBytes } from 'node:crypto';
import { AddressBook, MAX_KNOWN_PEERS, MAX_URLS_PER_PEER } from '../src/agent/peer-address.js';
import { agentIdFromPublicKey } from '../src/identity/agent-id.js';
import { memoryTransport } from './memory-transport.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

const peers = Array.from({ length: 4 }, () => Identity.generate().id);
const url = (n: number): URL => new URL(`wss://10.0.0.${n}:4433/agentlink`);
const hrefs = (urls: URL[]): string[] => urls.map((u) => u.href);

describe('AddressBook', () => {
  it('keeps a peer\'s most recently learned URLs first, each once, at most MAX_URLS_PER_PEER', () => {
    const book = new AddressBook();
    for (let n = 1; n <= MAX_URLS_PER_PEER + 5; n++) book.add(peers[0]!, url(n));
    book.add(peers[0]!, url(MAX_URLS_PER_PEER + 5)); // learned again: not twice
    const kept = hrefs(book.get(peers[0]!));
    expect(kept).toHaveLength(MAX_URLS_PER_PEER);
    expect(kept[0]).toBe(url(MAX_URLS_PER_PEER + 5).href);
    expect(kept.at(-1)).toBe(url(6).href); // the five learned first were dropped
    expect(kept).not.toContain(url(5).href);
  });

  it('forgets the peer learned or dialled longest ago once it holds its most peers', () => {
    const book = new AddressBook(3);
    const [a, b, c, d] = peers as [AgentId, AgentId, AgentId, AgentId];
    book.add(a, url(1));
    book.add(b, url(2));
    book.add(c, url(3));
    expect(hrefs(book.get(a))).toEqual([url(1).href]); // a dial of `a` makes it the most recently used
    book.add(d, url(4));
    expect(book.size).toBe(3);
    expect(book.has(b)).toBe(false);
    expect(hrefs(book.get(b))).toEqual([]);
    for (const [peer, n] of [[a, 1], [c, 3], [d, 4]] as const) expect(hrefs(book.get(peer))).toEqual([url(n).href]);
  });

  it('holds at most MAX_KNOWN_PEERS peers by default', () => {
    const book = new AddressBook();
    const id = peers[0]!;
    // AgentIds are only map keys here: distinct strings of the right shape are enough to fill it.
    for (let n = 0; n < MAX_KNOWN_PEERS + 100; n++) book.add(`${id.slice(0, -8)}${String(n).padStart(8, '0')}` as AgentId, url(1));
    expect(book.size).toBe(MAX_KNOWN_PEERS);
    expect(book.has(`${id.slice(0, -8)}${'0'.repeat(8)}` as AgentId)).toBe(false);
    expect(book.has(`${id.slice(0, -8)}${String(MAX_KNOWN_PEERS + 99).padStart(8, '0')}` as AgentId)).toBe(true);
  });
});

describe("an agent's address book, once it forgot a peer", () => {
  // The agent remembers each `<AgentId>@<url>` text it resolved (4,096 of them) and skips the address book for it
  // the next time. A peer forgotten by the book meanwhile (16,384 others learned since: a cluster's instances over
  // deploys, an app's addPeer) could then not be dialled again even by its full address, which the docs promise:
  // "no address known for … call it as <AgentId>@<url>", for a call made exactly so.
  it('reaches it again when called by its full address, as before', async () => {
    const network = new Map<string, ListenContext>();
    const server = await createAgent({ channels: [memoryTransport(network, 'server')] });
    const client = await createAgent({ channels: [memoryTransport(network)] });
    agents.push(server, client);
    server.handle('echo', (n: number) => n);
    const address = server.addresses[0]!;
    expect(await client.send(address, 'echo', 1)).toBe(1);
    await Promise.all(client.channels(server.id).map((channel) => channel.close())); // the next call dials

    for (let n = 0; n < MAX_KNOWN_PEERS; n++) client.addPeer(`${agentIdFromPublicKey(randomBytes(32))}@memory://elsewhere`);
    expect(await client.send(address, 'echo', 2)).toBe(2);
  });
});
