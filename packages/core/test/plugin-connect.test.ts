import { afterEach, describe, expect, it } from 'vitest';
import { AgentError, Identity, createAgent, type Agent, type AgentPlugin } from '../src/index.js';
import type { ListenContext } from '../src/transport.js';
import { memoryTransport } from './memory-transport.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

describe('a plugin that answers a dial with a channel to another agent', () => {
  it('is refused (UNAUTHENTICATED, the channel closed), not filed under that agent and asked again', async () => {
    const network = new Map<string, ListenContext>();
    const other = await createAgent({ channels: [memoryTransport(network, 'other')] });
    other.handle('who', () => 'other');
    const transport = memoryTransport(network);
    let asked = 0;
    // A NAT plugin misled by its rendezvous, say: asked for `wanted`, it reaches `other` (pinning other's key).
    const misled: AgentPlugin = {
      name: 'misled',
      connect: async (_peer, signal) => {
        asked++;
        return transport.dial(new URL('memory://other'), { ...context, expectedPeer: other.id, signal });
      },
    };
    let context!: ListenContext;
    const wanted = Identity.generate().id;
    const victim = await createAgent({
      channels: [transport],
      plugins: [{ name: 'context', start: async (_agent, c) => void (context = c) }, misled],
    });
    agents.push(other, victim);
    const failure = await victim.send(wanted, 'who', undefined, { timeoutMs: 2000 }).then(
      (reply) => reply,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(AgentError);
    expect((failure as AgentError).code).toBe('UNAUTHENTICATED');
    // Before: the channel was filed under `other`, `wanted`'s call still had none, and the pool asked again at
    // once, until the call's deadline (thousands of channels to `other`).
    expect(asked).toBe(1);
    expect(victim.channels(other.id)).toEqual([]);
  });
});
