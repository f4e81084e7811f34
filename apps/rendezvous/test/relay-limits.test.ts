import { AgentError } from '@agentlink/core';
import type { ChannelStream } from '@agentlink/core/transport';
import { signRecord } from '@agentlink/nat';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, reachableAgent, recordOf, rendezvous, strayByteClient, wsClient } from './helpers.js';

afterEach(cleanup);

/** A stranger with a fresh key, registered at `r` (a relay is opened only by a registered agent). */
async function registeredStranger(r: Awaited<ReturnType<typeof rendezvous>>) {
  const stranger = await wsClient();
  await stranger.send(r.address, 'rdv.register', signRecord(stranger.identity, recordOf(stranger.identity)));
  return stranger;
}

describe('relay limits under a hostile caller', () => {
  it('relays opened all at once by one agent are held to maxRelaysPerAgent', async () => {
    const r = await rendezvous({ maxRelaysPerAgent: 4 });
    const victim = await reachableAgent(r);
    const stranger = await registeredStranger(r);
    const opened = await Promise.all(
      Array.from({ length: 20 }, () =>
        stranger.openTunnel(r.address, 'rdv.relay', { target: victim.agent.id }, { timeoutMs: 5000 }).then(
          () => 'open',
          (e: AgentError) => e.code,
        ),
      ),
    );
    expect(opened.filter((x) => x === 'open')).toHaveLength(4);
    expect(opened.filter((x) => x === 'RESOURCE_EXHAUSTED')).toHaveLength(16);
    expect((await r.health()).relays).toBe(4);
    expect(r.metrics.rejectedCount('relay-limit')).toBe(16);
  });

  it('relays opened all at once are held to maxRelays in all', async () => {
    const r = await rendezvous({ maxRelays: 5 });
    const victim = await reachableAgent(r);
    const strangers = await Promise.all(Array.from({ length: 3 }, () => registeredStranger(r)));
    const opened = await Promise.all(
      strangers.flatMap((s) =>
        Array.from({ length: 4 }, () =>
          s.openTunnel(r.address, 'rdv.relay', { target: victim.agent.id }, { timeoutMs: 5000 }).then(
            () => 'open',
            (e: AgentError) => e.code,
          ),
        ),
      ),
    );
    expect(opened.filter((x) => x === 'open')).toHaveLength(5);
    expect((await r.health()).relays).toBe(5);
  });

  it('relays towards one agent are held to maxRelaysPerTarget, whoever opens them', async () => {
    const r = await rendezvous({ maxRelaysPerTarget: 2 });
    const victim = await reachableAgent(r);
    const other = await reachableAgent(r);
    const strangers = await Promise.all(Array.from({ length: 3 }, () => registeredStranger(r)));
    const opened = await Promise.all(
      strangers.map((s) =>
        s.openTunnel(r.address, 'rdv.relay', { target: victim.agent.id }, { timeoutMs: 5000 }).then(
          () => 'open',
          (e: AgentError) => e.message,
        ),
      ),
    );
    expect(opened.filter((x) => x === 'open')).toHaveLength(2);
    expect(opened).toContain("at most 2 relays towards one agent (the rendezvous' maxRelaysPerTarget is 2; its operator raises it with startRendezvous({ maxRelaysPerTarget }))");
    // Other agents are still relayed to.
    await strangers[0]!.openTunnel(r.address, 'rdv.relay', { target: other.agent.id }, { timeoutMs: 5000 });
    expect((await r.health()).relays).toBe(3);
  });

  it("relays strangers open to an agent do not use up that agent's own relays", async () => {
    const r = await rendezvous({ maxRelaysPerAgent: 2 });
    const victim = await reachableAgent(r);
    const friend = await reachableAgent(r);
    const strangers = await Promise.all(Array.from({ length: 2 }, () => registeredStranger(r)));
    for (const s of strangers) await s.openTunnel(r.address, 'rdv.relay', { target: victim.agent.id }, { timeoutMs: 5000 });
    // The victim still opens its own relay (its caller quota is its own, whatever strangers aimed at it).
    const { stream } = await victim.agent.openTunnel(r.address, 'rdv.relay', { target: friend.agent.id }, { timeoutMs: 5000 });
    stream.reset(new Error('done') as AgentError);
    expect((await r.health()).relays).toBe(3);
  });
});

describe('a relay caller that leaves before its tunnel opens', () => {
  // A relay holds its place from admission (before its tunnel to the target opens): this checks it is given back.
  it("closes the target's tunnel and gives the place back", async () => {
    const r = await rendezvous({ maxRelaysPerAgent: 1 });
    const victim = await reachableAgent(r);
    // The victim's side of relay tunnels, held back until the caller has left.
    let arrived!: () => void;
    const relayArrived = new Promise<void>((resolve) => (arrived = resolve));
    let accept!: () => void;
    const accepted = new Promise<void>((resolve) => (accept = resolve));
    const victimSide: ChannelStream[] = [];
    victim.agent.handleTunnel('nat.relay', async () => {
      arrived();
      await accepted;
      return { accept: true, onOpen: (stream: ChannelStream) => victimSide.push(stream) };
    });
    const stranger = await registeredStranger(r);
    const leaving = new AbortController();
    const opening = stranger.openTunnel(r.address, 'rdv.relay', { target: victim.agent.id }, { signal: leaving.signal, timeoutMs: 5000 });
    await relayArrived;
    leaving.abort(new AgentError('CANCELLED', 'the stranger leaves'));
    await expect(opening).rejects.toMatchObject({ code: 'CANCELLED' });
    accept();
    // The rendezvous resets the tunnel it opened to the victim.
    while (victimSide.length === 0) await new Promise((resolve) => setImmediate(resolve));
    await expect(victimSide[0]!.read()).rejects.toMatchObject({ code: 'CANCELLED' });
    // And the stranger's quota is free again.
    await stranger.openTunnel(r.address, 'rdv.relay', { target: victim.agent.id }, { timeoutMs: 5000 });
    expect((await r.health()).relays).toBe(1);
  });
});

describe('a relay caller that breaks the tunnel protocol', () => {
  // Core sends the acceptance, then finds the caller's byte behind its request and fails the call: the handler
  // gets no onOpen, and core aborts its signal. Until this test the relay's place was held for good (and the
  // target's tunnel left open), so a stranger with fresh keys pinned maxRelaysPerTarget towards any agent, or
  // maxRelays in all. (The rendezvous's own timer, relayIdleMs, is only a backstop: left at its 60 s here.)
  it("gets the target's tunnel reset and the place given back", async () => {
    const r = await rendezvous({ maxRelaysPerTarget: 1 });
    const victim = await reachableAgent(r);
    const victimSide: ChannelStream[] = [];
    let arrived!: () => void;
    const tunnelArrived = new Promise<void>((resolve) => (arrived = resolve));
    victim.agent.handleTunnel('nat.relay', () => ({
      accept: true,
      onOpen: (stream: ChannelStream) => {
        victimSide.push(stream);
        arrived();
      },
    }));
    const stranger = await strayByteClient();
    await stranger.send(r.address, 'rdv.register', signRecord(stranger.identity, recordOf(stranger.identity)));
    await stranger.openTunnel(r.address, 'rdv.relay', { target: victim.agent.id }, { timeoutMs: 5000 }).catch(() => undefined);
    await tunnelArrived;
    // The rendezvous gives up on the relay that never opened: the victim's side is reset...
    await expect(victimSide[0]!.read()).rejects.toMatchObject({ code: 'CANCELLED' });
    // ...and the place towards the victim is free again for an honest caller.
    expect((await r.health()).relays).toBe(0);
    const honest = await registeredStranger(r);
    await honest.openTunnel(r.address, 'rdv.relay', { target: victim.agent.id }, { timeoutMs: 5000 });
    expect((await r.health()).relays).toBe(1);
  });
});

describe('relays from one address', () => {
  it('one IP with many keys cannot take every relay: it is held to maxRelaysPerIp and others still get theirs', async () => {
    const r = await rendezvous({ maxRelays: 6, maxRelaysPerIp: 3 });
    const victim = await reachableAgent(r);
    // Three fresh keys from 127.0.0.3, two relays each: together past the per-IP limit.
    const strangers = await Promise.all(
      Array.from({ length: 3 }, async () => {
        const stranger = await wsClient('127.0.0.3');
        await stranger.send(r.address, 'rdv.register', signRecord(stranger.identity, recordOf(stranger.identity)));
        return stranger;
      }),
    );
    const opened = await Promise.all(
      strangers.flatMap((s) =>
        [0, 1].map(() =>
          s.openTunnel(r.address, 'rdv.relay', { target: victim.agent.id }, { timeoutMs: 5000 }).then(
            () => 'open',
            (e: AgentError) => e.message,
          ),
        ),
      ),
    );
    expect(opened.filter((x) => x === 'open')).toHaveLength(3);
    expect(opened).toContain("at most 3 relays from one address (the rendezvous' maxRelaysPerIp is 3; its operator raises it with --max-relays-per-ip or RENDEZVOUS_MAX_RELAYS_PER_IP)");
    // An agent elsewhere (127.0.0.1) still opens one.
    const honest = await registeredStranger(r);
    await honest.openTunnel(r.address, 'rdv.relay', { target: victim.agent.id }, { timeoutMs: 5000 });
    expect((await r.health()).relays).toBe(4);
  });
});

/** A stranger with a fresh key connecting from `ip` (every 127.0.0.0/8 address stands for another host), registered. */
async function strangerAt(r: Awaited<ReturnType<typeof rendezvous>>, ip: string) {
  const stranger = await wsClient(ip);
  await stranger.send(r.address, 'rdv.register', signRecord(stranger.identity, recordOf(stranger.identity)));
  return stranger;
}

describe('relays towards one agent from a few addresses', () => {
  it('each address gets at most maxRelaysPerTargetPerIp of them: two addresses cannot hold them all and deny the agent', async () => {
    const r = await rendezvous({ maxRelaysPerTarget: 8, maxRelaysPerTargetPerIp: 2 });
    const victim = await reachableAgent(r);
    const other = await reachableAgent(r);
    // Four fresh keys at each of two addresses, one relay each towards the victim: before 2026-11-24 all eight
    // opened (every relay towards the victim), kept alive by a byte a minute, and nobody else was relayed to it.
    const strangers = await Promise.all(['127.0.0.3', '127.0.0.4'].flatMap((ip) => [0, 1, 2, 3].map(() => strangerAt(r, ip))));
    const opened = await Promise.all(
      strangers.map((s) =>
        s.openTunnel(r.address, 'rdv.relay', { target: victim.agent.id }, { timeoutMs: 5000 }).then(
          () => 'open',
          (e: AgentError) => e.message,
        ),
      ),
    );
    expect(opened.filter((x) => x === 'open')).toHaveLength(4);
    expect(opened).toContain("at most 2 relays towards one agent from one address (the rendezvous' maxRelaysPerTargetPerIp is 2; its operator raises it with startRendezvous({ maxRelaysPerTargetPerIp }))");
    expect(r.metrics.rejectedCount('relay-limit')).toBe(4);
    // An agent at another address is still relayed to the victim, and those addresses to other agents.
    const honest = await registeredStranger(r);
    await honest.openTunnel(r.address, 'rdv.relay', { target: victim.agent.id }, { timeoutMs: 5000 });
    await strangers[0]!.openTunnel(r.address, 'rdv.relay', { target: other.agent.id }, { timeoutMs: 5000 });
    expect((await r.health()).relays).toBe(6);
  });
});
