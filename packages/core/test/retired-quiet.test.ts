import { afterEach, describe, expect, it, vi } from 'vitest';
import { Identity, createAgent, type Agent } from '../src/index.js';
import type { Channel, ListenContext } from '../src/transport.js';
import { retiredClose } from '../src/retired-close.js';
import { memoryTransport } from './memory-transport.js';

/** The pool's retire checks and quiet period (channel-pool.ts), stepped by a fake clock. */
const RETIRE_CHECK_MS = 200;
const RETIRE_QUIET_MS = 2_000;

const ioTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
  vi.useRealTimers();
});

/**
 * H (the higher AgentId) dialled R to L; L's own dial reaches H's pool only (the test makes it with L's identity),
 * so H retires R, which L still rides. The conformance suite holds every channel to the call-level rule; this
 * checks the pool's quiet period itself on core's mux.
 */
async function crossing() {
  const network = new Map<string, ListenContext>();
  const [lower, higher] = [Identity.generate(), Identity.generate()].sort((x, y) => (x.id < y.id ? -1 : 1));
  const lTransport = memoryTransport(network, 'l');
  let context!: ListenContext;
  const l = await createAgent({ identity: lower, channels: [lTransport], plugins: [{ name: 'context', start: async (_agent, c) => void (context = c) }] });
  const h = await createAgent({ identity: higher, channels: [memoryTransport(network, 'h')] });
  agents.push(l, h);
  const runs: unknown[] = [];
  h.handle('count', (body: unknown) => {
    runs.push(body);
    return body;
  });
  l.handle('echo', (body: unknown) => body);
  h.addPeer(l.addresses[0]!);
  expect(await h.send(l.id, 'echo', 'opens R')).toBe('opens R');
  const [rOnH] = h.channels(l.id) as [Channel];
  const [rOnL] = l.channels(h.id) as [Channel];
  const kept = await lTransport.dial(new URL('memory://h'), { ...context, expectedPeer: h.id, signal: new AbortController().signal });
  while (h.channels(l.id).length < 2) await ioTurn();
  while (rOnH.activeStreams > 0) await ioTurn();
  return { l, h, runs, rOnH, rOnL, kept };
}

describe('a retired channel is closed after a quiet period', () => {
  it('a call that starts and ends between two checks restarts the quiet period', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const { l, h, runs, rOnH, rOnL, kept } = await crossing();
    try {
      vi.advanceTimersByTime(RETIRE_QUIET_MS - RETIRE_CHECK_MS);
      expect(rOnH.isClosed).toBe(false);
      // A call on R, whole between two checks: no check sees its stream, yet R was not quiet.
      expect(await l.send(h.id, 'count', 'between checks')).toBe('between checks');
      vi.advanceTimersByTime(RETIRE_CHECK_MS);
      expect(rOnH.isClosed).toBe(false);
      vi.advanceTimersByTime(RETIRE_QUIET_MS - 2 * RETIRE_CHECK_MS);
      expect(rOnH.isClosed).toBe(false);
      vi.advanceTimersByTime(2 * RETIRE_CHECK_MS);
      expect(rOnH.isClosed).toBe(true);
      // The peer reads the close as the retired one: what it opened there unanswered is unprocessed.
      expect(await rOnL.closed).toMatchObject({ code: 'UNAVAILABLE', unprocessed: true });
      expect((await rOnH.closed).message).toMatch(/retired/);
      expect(runs).toEqual(['between checks']);
    } finally {
      await kept.close();
    }
  });
});

describe("a retired channel's close", () => {
  it('fails a call whose reply had begun, and does not resend it: the handler ran', async () => {
    const network = new Map<string, ListenContext>();
    const server = await createAgent({ channels: [memoryTransport(network, 'server')] });
    const client = await createAgent({ channels: [memoryTransport(network)] });
    agents.push(server, client);
    let runs = 0;
    server.handleStream('items', async function* () {
      runs++;
      yield 'first';
      await new Promise(() => undefined); // holds the stream open: only the close ends it
    });
    client.addPeer(server.addresses[0]!);
    const items = client.stream(server.id, 'items');
    expect((await items.next()).value).toBe('first');
    // The peer closes the channel as retired while its reply is under way (a peer breaking the rule, or a lie):
    // the call was processed, so it fails rather than running again on a new channel.
    const [onServer] = server.channels(client.id) as [Channel];
    void onServer.close(retiredClose('retired: test'));
    await expect(items.next()).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(runs).toBe(1);
  });
});
