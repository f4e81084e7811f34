import { createAgent, Identity, parsePeerReference, type AgentPlugin, type Transport } from '@agentlink/core';
import type { Channel, ListenContext } from '@agentlink/core/transport';
import { describe, expect, it, vi } from 'vitest';
import { channelOpened } from './crossed-dial.js';
import { loadFactory, type ConformanceTarget } from './target.js';

/** The pool's retire checks and quiet period (channel-pool.ts): a fake clock steps them. */
const RETIRE_CHECK_MS = 200;
const RETIRE_QUIET_MS = 2_000;

/** One turn of the real event loop (not faked): I/O that was ready has been handled. */
const ioTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * A plugin that holds the lower agent's own dial of a crossing: the test dials with the agent's identity and
 * hands the channel over when the agent's pool asks for one (it knows no address of the peer), so the peer has
 * that dial in its pool — and retires its own for it — while the agent still rides the peer's.
 */
interface HeldDial {
  plugin: AgentPlugin;
  /** What the plugin got at the agent's start: the identity, credentials and stream handler to dial with. */
  context(): ListenContext;
  /** Resolves once the agent's pool asked for a channel to the peer. */
  asked: Promise<void>;
  handOver(channel: Channel): void;
}

function heldDial(): HeldDial {
  let context: ListenContext | undefined;
  let ask!: () => void;
  const asked = new Promise<void>((resolve) => (ask = resolve));
  let handOver!: (channel: Channel) => void;
  const handed = new Promise<Channel>((resolve) => (handOver = resolve));
  const plugin: AgentPlugin = {
    name: 'held-dial',
    start: async (_agent, listenContext) => {
      context = listenContext;
    },
    connect: async () => {
      ask();
      return handed;
    },
  };
  return { plugin, context: () => context!, asked, handOver };
}

/**
 * Two agents call each other at once (a crossed dial): the channel the higher AgentId dialled is retired, and its
 * dialler closes it. A call the lower one started on it before it learned of the retirement is either answered
 * or resent on the kept channel — never run twice. Registered by `runConformanceSuite`.
 */
export function describeRetiredChannelCases(target: ConformanceTarget): void {
  describe('retired channels', () => {
    /**
     * H (higher AgentId) dialled R to L, and holds L's own dial too, which L's pool does not have yet: H retired R,
     * L rides it. `ran` counts the runs of H's `count` handler.
     */
    const setUp = async () => {
      const factory = await loadFactory(target);
      const [lower, higher] = [Identity.generate(), Identity.generate()].sort((x, y) => (x.id < y.id ? -1 : 1));
      const held = heldDial();
      const lTransport: Transport = factory(target.listenOptions);
      const l = await createAgent({ identity: lower, channels: [lTransport], plugins: [held.plugin] });
      const h = await createAgent({ identity: higher, channels: [factory(target.listenOptions)] });
      const runs: unknown[] = [];
      h.handle('count', (body: unknown) => {
        runs.push(body);
        return body;
      });
      l.handle('echo', (body: unknown) => body);
      h.addPeer(l.addresses[0]!);
      expect(await h.send(l.id, 'echo', 'opens R')).toBe('opens R');
      const rOnH = await channelOpened(h, l, 'local');
      const rOnL = await channelOpened(l, h, 'remote');
      // L's own dial, made with L's identity and stream handler, reaches H's pool only: H keeps it, retires R.
      const context = held.context();
      const kept = await lTransport.dial(parsePeerReference(h.addresses[0]!).url!, {
        identity: context.identity,
        tls: context.tls,
        onStream: context.onStream,
        expectedPeer: h.id,
        signal: new AbortController().signal,
      });
      await channelOpened(h, l, 'remote');
      expect(l.channels(h.id)).toEqual([rOnL]);
      const close = async (): Promise<void> => {
        await l.close();
        await h.close();
        await kept.close();
      };
      return { l, h, held, runs, rOnH, rOnL, kept, close };
    };

    it('a call in flight on the channel its peer retires and closes is resent on the kept channel, and runs once', async () => {
      vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
      const { l, h, held, runs, rOnH, rOnL, kept, close } = await setUp();
      try {
        while (rOnH.activeStreams > 0) await ioTurn();
        // L calls on R, and before H reads the request (no I/O runs in between) H's checks find R quiet long
        // enough and close it: H never processed the call.
        const call = l.send(h.id, 'count', 'in flight');
        vi.advanceTimersByTime(RETIRE_QUIET_MS + RETIRE_CHECK_MS);
        expect(rOnH.isClosed).toBe(true);
        expect((await rOnH.closed).message).toMatch(/retired/);
        // The call failed there unprocessed: L resends it at once, and its pool asks for a channel to H — the
        // one both keep — rather than the call failing.
        const failed = call.then(() => 'answered before any resend', (error: unknown) => error);
        expect(await Promise.race([held.asked.then(() => 'resending'), failed])).toBe('resending');
        expect(runs).toEqual([]);
        held.handOver(kept);
        expect(await call).toBe('in flight');
        expect(runs).toEqual(['in flight']);
        await rOnL.closed;
        expect(l.channels(h.id)).toEqual([kept]);
        expect(await l.send(h.id, 'count', 'after')).toBe('after');
        expect(runs).toEqual(['in flight', 'after']);
      } finally {
        await close();
        vi.useRealTimers();
      }
    });

    it('a call answered on a retired channel is not resent: the channel is closed only after a quiet period', async () => {
      vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
      const { l, h, held, runs, rOnH, rOnL, kept, close } = await setUp();
      try {
        // Rides R, which H retired but serves; H's reply went out just before its checks find R without streams.
        const call = l.send(h.id, 'count', 'answered');
        while (runs.length === 0 || rOnH.activeStreams > 0) await ioTurn();
        // Within the quiet period H leaves R open (a close right after the reply could drop it: QUIC).
        vi.advanceTimersByTime(RETIRE_QUIET_MS - RETIRE_CHECK_MS);
        expect(rOnH.isClosed).toBe(false);
        expect(await call).toBe('answered');
        while (!rOnH.isClosed) {
          vi.advanceTimersByTime(RETIRE_CHECK_MS);
          await ioTurn();
        }
        expect((await rOnH.closed).message).toMatch(/retired/);
        await rOnL.closed;
        // Nothing was resent: the handler ran once, and L's pool never asked for another channel.
        expect(runs).toEqual(['answered']);
        let asked = false;
        void held.asked.then(() => (asked = true));
        await ioTurn();
        expect(asked).toBe(false);
        held.handOver(kept);
        expect(await l.send(h.id, 'count', 'after')).toBe('after');
        expect(runs).toEqual(['answered', 'after']);
      } finally {
        await close();
        vi.useRealTimers();
      }
    });
  });
}
