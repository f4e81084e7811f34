import { afterEach, expect, it, vi } from 'vitest';
import { createAgent, type Agent } from '../src/index.js';
import type { ListenContext } from '../src/transport.js';
import { memoryTransport, type SentFrame } from './memory-transport.js';

const ioTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

const agents: Agent[] = [];
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

/** The server's idle timeout: above the retired channels' quiet period (2 s), as the default (5 min) is. */
const IDLE_MS = 4_000;

it('a call that crosses the peer closing the channel for idleness is resent on a new channel and runs once', async () => {
  // The idle close and a new call of the peer's cross on the wire: the server closed the channel (its checks found
  // it idle) while the request was on its way, and never processed it. Its close says so (the retired close code,
  // docs/protocol.md "Retired channels"), so the caller resends the call rather than failing it UNAVAILABLE.
  vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'] });
  const network = new Map<string, ListenContext>();
  const server = await createAgent({ channels: [memoryTransport(network, 'server')], idleTimeoutMs: IDLE_MS, healthCheckIntervalMs: 0 });
  const client = await createAgent({ channels: [memoryTransport(network)], idleTimeoutMs: 0, healthCheckIntervalMs: 0 });
  agents.push(server, client);
  const runs: unknown[] = [];
  server.handle('count', (body: unknown) => {
    runs.push(body);
    return body;
  });
  client.addPeer(server.addresses[0]!);
  expect(await client.send(server.id, 'count', 'opens the channel')).toBe('opens the channel');
  const [first] = client.channels(server.id);
  const [onServer] = server.channels(client.id);
  while (onServer!.activeStreams > 0) await ioTurn();
  // The server's idle checks run every quarter of its timeout: the first finds the channel idle, the fourth after
  // it would close it.
  vi.advanceTimersByTime(IDLE_MS / 4);
  vi.advanceTimersByTime(IDLE_MS - IDLE_MS / 4);
  expect(onServer!.isClosed).toBe(false);

  const call = client.send(server.id, 'count', 'crosses the close');
  vi.advanceTimersByTime(IDLE_MS / 4); // in the same turn: the request has not reached the server yet
  expect(onServer!.isClosed).toBe(true);
  expect(await call).toBe('crosses the close');
  expect(await first!.closed).toMatchObject({ unprocessed: true });
  expect(runs).toEqual(['opens the channel', 'crosses the close']);
});

it('a tunnel whose opening crosses the peer closing the channel for idleness is opened on a new channel, once', async () => {
  // Tunnels skip call-attempt.ts, where calls are resent: the opening failed unprocessed, and was lost.
  vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'] });
  const network = new Map<string, ListenContext>();
  const server = await createAgent({ channels: [memoryTransport(network, 'server')], idleTimeoutMs: IDLE_MS, healthCheckIntervalMs: 0 });
  const client = await createAgent({ channels: [memoryTransport(network)], idleTimeoutMs: 0, healthCheckIntervalMs: 0 });
  agents.push(server, client);
  let accepted = 0;
  server.handleTunnel('pipe', (body: unknown) => {
    accepted++;
    return { accept: body, onOpen: () => undefined }; // the agents' close ends the tunnel
  });
  server.handle('echo', (body: unknown) => body);
  client.addPeer(server.addresses[0]!);
  expect(await client.send(server.id, 'echo', 'opens the channel')).toBe('opens the channel');
  const [onServer] = server.channels(client.id);
  while (onServer!.activeStreams > 0) await ioTurn();
  vi.advanceTimersByTime(IDLE_MS / 4);
  vi.advanceTimersByTime(IDLE_MS - IDLE_MS / 4);
  expect(onServer!.isClosed).toBe(false);

  const opening = client.openTunnel(server.id, 'pipe', 'crosses the close');
  vi.advanceTimersByTime(IDLE_MS / 4);
  expect(onServer!.isClosed).toBe(true);
  const tunnel = await opening;
  expect(tunnel.accepted).toBe('crosses the close');
  expect(accepted).toBe(1);
});

it("the peer's health checks do not keep a channel from closing for idleness", async () => {
  // Each health check is a ping on a stream of its own: counted as a use, it kept every channel between two agents
  // busy for ever (pings every 30 s, idle close after 5 min, by default).
  vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'] });
  const network = new Map<string, ListenContext>();
  const sent: SentFrame[] = [];
  const server = await createAgent({ channels: [memoryTransport(network, 'server')], idleTimeoutMs: IDLE_MS, healthCheckIntervalMs: 0 });
  const client = await createAgent({ channels: [memoryTransport(network, undefined, undefined, sent)], idleTimeoutMs: 0, healthCheckIntervalMs: IDLE_MS / 4 });
  agents.push(server, client);
  server.handle('echo', (body: unknown) => body);
  client.addPeer(server.addresses[0]!);
  expect(await client.send(server.id, 'echo', 'opens the channel')).toBe('opens the channel');
  const [onServer] = server.channels(client.id);
  while (onServer!.activeStreams > 0) await ioTurn();
  let pinged = 0;
  for (let check = 0; check < 8 && !onServer!.isClosed; check++) {
    const before = sent.filter((f) => f.from === 'dialer').length;
    vi.advanceTimersByTime(IDLE_MS / 4); // a health check of the client's, and an idle check of the server's
    for (let turn = 0; turn < 8; turn++) await ioTurn(); // the ping's stream opens and ends
    if (sent.filter((f) => f.from === 'dialer').length > before) pinged++;
  }
  expect(pinged).toBeGreaterThanOrEqual(4); // pings crossed the channel throughout its idle timeout
  expect(onServer!.isClosed).toBe(true);
});
