import type { ListenContext } from '../src/transport.js';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentError, createAgent, fallback, parallel, race, raceStream, type Agent } from '../src/index.js';
import { memoryTransport } from './memory-transport.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

/** Peers that answer their name, fail, or hang until cancelled (reporting the reason to `cancelled`). */
async function cluster(behaviours: Array<'answer' | 'unavailable' | 'invalid' | 'hang'>) {
  const network = new Map<string, ListenContext>();
  const cancelled: Array<{ name: string; reason: AgentError }> = [];
  const addresses: string[] = [];
  for (const [i, behaviour] of behaviours.entries()) {
    const name = `peer-${i}`;
    const server = await createAgent({ channels: [memoryTransport(network, name)] });
    agents.push(server);
    server.handle('ask', (_body: unknown, ctx) => {
      if (behaviour === 'answer') return name;
      if (behaviour === 'unavailable') throw new AgentError('UNAVAILABLE', `${name} is overloaded`);
      if (behaviour === 'invalid') throw new AgentError('INVALID_ARGUMENT', `${name} refuses`);
      return new Promise((_resolve, reject) =>
        ctx.signal.addEventListener('abort', () => {
          cancelled.push({ name, reason: ctx.signal.reason as AgentError });
          reject(ctx.signal.reason);
        }),
      );
    });
    server.handleStream('tokens', async function* (_body: unknown, ctx) {
      if (behaviour === 'hang') {
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
        cancelled.push({ name, reason: ctx.signal.reason as AgentError });
        return;
      }
      if (behaviour !== 'answer') throw new AgentError('UNAVAILABLE', `${name} is down`);
      for (let t = 0; t < 3; t++) yield `${name}:${t}`;
    });
    addresses.push(server.addresses[0]!);
  }
  const caller = await createAgent({ channels: [memoryTransport(network)] });
  agents.push(caller);
  const settle = async (count: number) => {
    for (let i = 0; i < 200 && cancelled.length < count; i++) await new Promise((r) => setTimeout(r, 5));
  };
  return { caller, addresses, cancelled, settle };
}

describe('composition helpers', () => {
  it('parallel all: every answer in the peers order', async () => {
    const { caller, addresses } = await cluster(['answer', 'answer', 'answer']);
    expect(await parallel(caller, addresses, 'ask')).toEqual(['peer-0', 'peer-1', 'peer-2']);
  });

  it('parallel all: the first failure rejects and cancels the calls still running', async () => {
    const { caller, addresses, cancelled, settle } = await cluster(['invalid', 'hang']);
    await expect(parallel(caller, addresses, 'ask')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await settle(1);
    expect(cancelled.map((c) => [c.name, c.reason.code])).toEqual([['peer-1', 'CANCELLED']]);
  });

  it('parallel first: the first success wins over failures; the hanging loser is cancelled', async () => {
    const { caller, addresses, cancelled, settle } = await cluster(['unavailable', 'hang', 'answer']);
    expect(await parallel(caller, addresses, 'ask', undefined, { mode: 'first' })).toEqual(['peer-2']);
    await settle(1);
    expect(cancelled.map((c) => c.name)).toEqual(['peer-1']);
  });

  it('parallel quorum: the first n successes; fails once a quorum is out of reach', async () => {
    const ok = await cluster(['answer', 'hang', 'answer']);
    expect((await parallel(ok.caller, ok.addresses, 'ask', undefined, { mode: 'quorum' })).sort()).toEqual(['peer-0', 'peer-2']);
    await ok.settle(1);
    expect(ok.cancelled.map((c) => c.name)).toEqual(['peer-1']);
    const short = await cluster(['unavailable', 'unavailable', 'answer']);
    await expect(parallel(short.caller, short.addresses, 'ask', undefined, { mode: 'quorum', quorum: 2 })).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    await expect(parallel(short.caller, short.addresses, 'ask', undefined, { mode: 'quorum', quorum: 4 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('fallback: the next peer on a retryable error, not on others; a deadline bounds the whole sequence', async () => {
    const { caller, addresses } = await cluster(['unavailable', 'answer', 'invalid', 'hang']);
    expect(await fallback(caller, addresses, 'ask')).toBe('peer-1');
    await expect(fallback(caller, [addresses[2]!, addresses[1]!], 'ask')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(fallback(caller, [addresses[0]!, addresses[3]!], 'ask', undefined, { timeoutMs: 100 })).rejects.toMatchObject({ code: 'DEADLINE_EXCEEDED' });
    await expect(fallback(caller, [addresses[0]!], 'ask')).rejects.toMatchObject({ code: 'UNAVAILABLE', message: 'peer-0 is overloaded' });
  });

  it('race: the first to settle wins, the loser is cancelled with the reason', async () => {
    const { caller, addresses, cancelled, settle } = await cluster(['hang', 'answer']);
    expect(await race(caller, addresses, 'ask')).toBe('peer-1');
    await settle(1);
    expect(cancelled[0]).toMatchObject({ name: 'peer-0', reason: { code: 'CANCELLED', message: 'ask: another peer answered first' } });
  });

  it('raceStream: the first stream to yield wins and is read to its end; the others are cancelled', async () => {
    const { caller, addresses, cancelled, settle } = await cluster(['hang', 'unavailable', 'answer']);
    const tokens: string[] = [];
    for await (const token of raceStream<string>(caller, addresses, 'tokens')) tokens.push(token);
    expect(tokens).toEqual(['peer-2:0', 'peer-2:1', 'peer-2:2']);
    await settle(1);
    expect(cancelled.map((c) => c.name)).toEqual(['peer-0']);
  });
});
