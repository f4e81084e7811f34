import { createSocket, type Socket } from 'node:dgram';
import { once } from 'node:events';
import { createAgent, type Agent, type AgentError, type AgentOptions, type Identity } from '@agentlink/core';
import type { Channel, ChannelStream, Transport } from '@agentlink/core/transport';
import { reach, type PeerRecord, type Reach, type ReachOptions } from '@agentlink/nat';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';
import { startRendezvous, type Rendezvous, type RendezvousOptions } from '../src/index.js';

const cleanups: Array<() => Promise<void>> = [];

export async function rendezvous(options: RendezvousOptions = {}): Promise<Rendezvous> {
  const r = await startRendezvous({ host: '127.0.0.1', port: 0, stunPorts: [0, 0], httpPort: 0, ...options });
  cleanups.push(() => r.close());
  return r;
}

/** An agent on loopback with QUIC, a ws channel to dial the rendezvous, and the reach plugin. */
export async function reachableAgent(
  r: Rendezvous,
  options: Partial<ReachOptions> = {},
  agentOptions: Partial<AgentOptions> = {},
): Promise<{ agent: Agent; nat: Reach }> {
  const q = quic({ port: 0, host: '127.0.0.1' });
  const nat = reach({ rendezvous: r.address, quic: q, ...options });
  const agent = await createAgent({ ...agentOptions, channels: [q, webSocket()], plugins: [nat] });
  cleanups.push(() => agent.close());
  return { agent, nat };
}

/** A plain agent that only dials over ws (for talking to the rendezvous directly). */
export async function wsClient(localAddress?: string): Promise<Agent> {
  const agent = await createAgent({ channels: [webSocket({ localAddress })] });
  cleanups.push(() => agent.close());
  return agent;
}

/**
 * A plain ws agent that breaks the tunnel protocol: each stream it opens carries one stray byte right behind its
 * request, in the same chunk (as a caller that starts talking before the tunnel is accepted would send).
 */
export async function strayByteClient(): Promise<Agent> {
  const agent = await createAgent({ channels: [strayByteTransport(webSocket())] });
  cleanups.push(() => agent.close());
  return agent;
}

/** `inner`, with each stream a dialled channel opens writing one byte more behind its first write. */
function strayByteTransport(inner: Transport): Transport {
  const strayAfterFirst = (stream: ChannelStream): ChannelStream => {
    let first = true;
    return forward(stream, {
      write: (chunk: Uint8Array) => {
        if (!first) return stream.write(chunk);
        first = false;
        return stream.write(Buffer.concat([chunk, Buffer.from('x')]));
      },
    });
  };
  const channelOf = (channel: Channel): Channel =>
    forward(channel, {
      openStreamNow: undefined,
      openStream: async (options?: Parameters<Channel['openStream']>[0]) => strayAfterFirst(await channel.openStream(options)),
    });
  return forward(inner, { dial: async (address: URL, context: Parameters<Transport['dial']>[1]) => channelOf(await inner.dial(address, context)) });
}

/** `target` with `overrides` in place of some of its members (methods bound to `target`). */
function forward<T extends object>(target: T, overrides: Record<string, unknown>): T {
  return new Proxy(target, {
    get(t, key, receiver) {
      if (typeof key === 'string' && key in overrides) return overrides[key];
      const value: unknown = Reflect.get(t, key, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(t) : value;
    },
  });
}

export async function cleanup(): Promise<void> {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A plausible record of `identity` (a public candidate, a cone NAT, 30 s to live), with `overrides`. */
export const recordOf = (identity: Identity, overrides: Partial<PeerRecord> = {}): PeerRecord => ({
  agentId: identity.id,
  candidates: ['quic://203.0.113.7:40000'],
  nat: 'cone',
  portDelta: 0,
  seq: 1,
  expiresAt: Date.now() + 30_000,
  ...overrides,
});

/** The error a call fails with; fails the test if it succeeds. */
export async function failure(promise: Promise<unknown>): Promise<AgentError> {
  try {
    await promise;
  } catch (error) {
    return error as AgentError;
  }
  throw new Error('expected a failure');
}

/** A UDP socket on `host` that counts the datagrams it receives. */
export async function udpListener(host: string): Promise<{ socket: Socket; port: number; datagrams: number[] }> {
  const socket = createSocket('udp4');
  const datagrams: number[] = [];
  socket.on('message', (message) => datagrams.push(message.length));
  socket.bind(0, host);
  await once(socket, 'listening');
  return { socket, port: socket.address().port, datagrams };
}
