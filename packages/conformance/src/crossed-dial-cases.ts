import diagnostics from 'node:diagnostics_channel';
import { createAgent, Identity, type Agent } from '@agentlink/core';
import type { Channel } from '@agentlink/core/transport';
import { describe, expect, it, vi } from 'vitest';
import { within } from './assertions.js';
import { channelOpened, crossedDial } from './crossed-dial.js';
import { loadFactory, type ConformanceTarget } from './target.js';

/** How often the pool checks its retired channels (channel-pool.ts), and a span of a few checks: a fake clock steps them. */
const RETIRE_CHECK_MS = 200;
const RETIRE_CHECKS_SPAN_MS = 5 * RETIRE_CHECK_MS;

/** One turn of the real event loop (not faked): I/O that was ready has been handled. */
const ioTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Two agents that call each other at once each dial the other (a hole punch does it on purpose): both must end
 * with one channel, and no call may fail on the way. Registered by `runConformanceSuite`.
 */
export function describeCrossedDialCases(target: ConformanceTarget): void {
  describe('crossed dials', () => {
    const listening = async (options: { identity?: Identity; authorizePeer?: () => Promise<boolean> } = {}): Promise<Agent> => {
      const factory = await loadFactory(target);
      const agent = await createAgent({ ...options, channels: [factory(target.listenOptions)] });
      agent.handle('echo', (body: unknown) => body);
      return agent;
    };
    const initiators = (channels: Channel[]): string[] => channels.map((c) => c.initiator);

    it("two agents dialling each other at once end with one channel, the lower AgentId's dial, which carries calls both ways", async () => {
      const a = await listening();
      const b = await listening();
      try {
        a.addPeer(b.addresses[0]!);
        b.addPeer(a.addresses[0]!);
        const { replies, onA, onB } = await within(crossedDial(a, b), 20_000, 'the crossed dial settling');
        // Neither first call failed, whichever channel it rode (a retired channel serves its calls, then closes).
        expect(replies).toEqual(['from a', 'from b']);
        // One channel each way opened on each side; both sides closed the one the higher AgentId dialled.
        const lowerIsA = a.id < b.id;
        expect(initiators(onA.opened).sort()).toEqual(['local', 'remote']);
        expect(initiators(onB.opened).sort()).toEqual(['local', 'remote']);
        expect(initiators(onA.closed)).toEqual([lowerIsA ? 'remote' : 'local']);
        expect(initiators(onB.closed)).toEqual([lowerIsA ? 'local' : 'remote']);
        // The other one is what each pool holds, open; later calls both ways ride it: nothing is dialled again.
        const keptByA = onA.opened.find((c) => !onA.closed.includes(c))!;
        const keptByB = onB.opened.find((c) => !onB.closed.includes(c))!;
        const holds = (agent: Agent, peer: Agent, kept: Channel): boolean[] => agent.channels(peer.id).map((c) => c === kept && !c.isClosed);
        expect(holds(a, b, keptByA)).toEqual([true]);
        expect(holds(b, a, keptByB)).toEqual([true]);
        expect(await a.send(b.id, 'echo', 'again from a')).toBe('again from a');
        expect(await b.send(a.id, 'echo', 'again from b')).toBe('again from b');
        expect(holds(a, b, keptByA)).toEqual([true]);
        expect(holds(b, a, keptByB)).toEqual([true]);
      } finally {
        await a.close();
        await b.close();
      }
    });

    it('the channel a crossed dial retires is closed by its dialler only: a slow gate on the kept one cuts no call on it', async () => {
      // The pool's checks for retired channels are stepped; sockets and everything else run on the real clock.
      vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
      const [lower, higher] = [Identity.generate(), Identity.generate()].sort((x, y) => (x.id < y.id ? -1 : 1));
      let admit!: () => void;
      const admitted = new Promise<boolean>((resolve) => (admit = () => resolve(true)));
      // A keeps its own dial (the lower AgentId's); B's gate holds it, so meanwhile B rides its own dial.
      const a = await listening({ identity: lower });
      const b = await listening({ identity: higher, authorizePeer: () => admitted });
      try {
        a.addPeer(b.addresses[0]!);
        b.addPeer(a.addresses[0]!);
        const fromA = a.send(b.id, 'echo', 'from a'); // rides A's dial, served once B's gate decides
        const aDial = await channelOpened(a, b, 'local');
        expect(await b.send(a.id, 'echo', 'from b')).toBe('from b'); // B has no channel it admitted: it dials
        const bDial = await channelOpened(a, b, 'remote');
        expect(initiators(a.channels(b.id))).toEqual(['local', 'remote']);
        // A retired B's dial and it has no stream left on A: however many checks pass, A leaves its close to B.
        while (bDial.activeStreams > 0) await ioTurn();
        vi.advanceTimersByTime(RETIRE_CHECKS_SPAN_MS);
        expect(bDial.isClosed).toBe(false);
        expect(await b.send(a.id, 'echo', 'while gated')).toBe('while gated');
        expect(initiators(b.channels(a.id))).toEqual(['local']); // rode it: no dial again
        // B admits A's dial: it retires its own and closes it once its streams have ended; both keep A's.
        admit();
        expect(await fromA).toBe('from a');
        await channelOpened(b, a, 'remote');
        const [ownOnB] = b.channels(a.id).filter((c) => c.initiator === 'local');
        while (!ownOnB!.isClosed) {
          vi.advanceTimersByTime(RETIRE_CHECK_MS);
          await ioTurn();
        }
        expect((await ownOnB!.closed).message).toMatch(/retired/);
        await bDial.closed;
        expect(a.channels(b.id)).toEqual([aDial]);
        expect(initiators(b.channels(a.id))).toEqual(['remote']);
        expect(await b.send(a.id, 'echo', 'after')).toBe('after');
      } finally {
        await a.close();
        await b.close();
        vi.useRealTimers();
      }
    });

    it("a crossed dial whose kept channel the other side's gate refuses is undone: its dialler's channel is the one both use, no dial again", async () => {
      vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
      const [lower, higher] = [Identity.generate(), Identity.generate()].sort((x, y) => (x.id < y.id ? -1 : 1));
      let decide!: (allowed: boolean) => void;
      const decided = new Promise<boolean>((resolve) => (decide = resolve));
      // A keeps its own dial (the lower AgentId's); B's gate holds it, then refuses it: B never retires its own.
      const a = await listening({ identity: lower });
      const b = await listening({ identity: higher, authorizePeer: () => decided });
      // A's dials to B, counted by the pool's own event.
      let dialsByA = 0;
      const onOpen = (message: unknown): void => {
        const { channel } = message as { channel: Channel };
        if (channel.peer === b.id && channel.initiator === 'local') dialsByA++;
      };
      diagnostics.subscribe('agentlink:channel:open', onOpen);
      try {
        a.addPeer(b.addresses[0]!);
        b.addPeer(a.addresses[0]!);
        const fromA = a.send(b.id, 'echo', 'from a').catch((error: unknown) => error);
        const aDial = await channelOpened(a, b, 'local');
        expect(await b.send(a.id, 'echo', 'from b')).toBe('from b'); // B dials: its gate has not admitted A's
        const bDial = await channelOpened(a, b, 'remote'); // A retired it for its own, and waits for B to close it
        decide(false);
        expect(await fromA).toMatchObject({ code: 'PERMISSION_DENIED' });
        await aDial.closed;
        // A now calls on B's dial (B refuses the call there, as it refuses A's channels) instead of dialling again
        // to be refused again; before, every call of A dialled, and B's dial stayed retired on A until idle.
        expect(await a.send(b.id, 'echo', 'again').catch((error: unknown) => error)).toMatchObject({ code: 'PERMISSION_DENIED' });
        expect(dialsByA).toBe(1);
        expect(a.channels(b.id)).toEqual([bDial]);
        // However many retire checks pass, nobody closes it: it is both sides' one channel, and B's calls ride it.
        vi.advanceTimersByTime(RETIRE_CHECKS_SPAN_MS);
        await ioTurn();
        expect(bDial.isClosed).toBe(false);
        expect(await b.send(a.id, 'echo', 'after')).toBe('after');
        expect(initiators(b.channels(a.id))).toEqual(['local']);
        expect(a.channels(b.id)).toEqual([bDial]);
      } finally {
        diagnostics.unsubscribe('agentlink:channel:open', onOpen);
        await a.close();
        await b.close();
        vi.useRealTimers();
      }
    });
  });
}
