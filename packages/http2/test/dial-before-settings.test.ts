import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { createServer, type Server, type TLSSocket } from 'node:tls';
import { AgentError, createAgent, Identity, type Agent } from '@agentlink/core';
import { selfSignedCertificate } from '@agentlink/core/transport';
import { afterEach, describe, expect, it } from 'vitest';
import { http2 } from '../src/index.js';
import { frame, PREFACE, SETTINGS } from './raw-frames.js';

/**
 * The dialler does not wait for the server's SETTINGS before its first call (they come half a round trip after its
 * own handshake ended): a server written by hand on node:tls, holding the dialled key, withholds its SETTINGS and
 * watches what the dialler sends meanwhile.
 */
const HEADERS = 0x1;
const DATA = 0x0;
const ACK = 0x1;
const GOAWAY = 0x7;
const SETTINGS_MAX_CONCURRENT_STREAMS = 0x3;
/** What nghttp2 takes a peer to allow until its SETTINGS say (RFC 9113's recommended floor). */
const STREAMS_BEFORE_SETTINGS = 100;

interface Frame {
  type: number;
  flags: number;
  stream: number;
}

const agents: Agent[] = [];
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
  for (const server of servers.splice(0)) server.close();
});

/** A TLS server with ALPN h2 that sends nothing of its own; `onFrame` sees each frame the client sends, in order. */
async function silentServer(onFrame: (frame: Frame, socket: TLSSocket) => void): Promise<string> {
  const identity = Identity.generate();
  const { key, cert } = selfSignedCertificate(identity);
  const server = createServer({ key, cert, minVersion: 'TLSv1.3', requestCert: true, rejectUnauthorized: false, ALPNProtocols: ['h2'] });
  servers.push(server);
  server.on('secureConnection', (socket: TLSSocket) => {
    socket.on('error', () => undefined);
    let buffered = Buffer.alloc(0);
    let prefaceSeen = false;
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (!prefaceSeen) {
        if (buffered.length < PREFACE.length) return;
        expect(buffered.subarray(0, PREFACE.length)).toEqual(PREFACE);
        buffered = buffered.subarray(PREFACE.length);
        prefaceSeen = true;
      }
      while (buffered.length >= 9 && buffered.length >= 9 + buffered.readUIntBE(0, 3)) {
        const length = buffered.readUIntBE(0, 3);
        onFrame({ type: buffered[3]!, flags: buffered[4]!, stream: buffered.readUInt32BE(5) & 0x7fff_ffff }, socket);
        buffered = buffered.subarray(9 + length);
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `${identity.id}@h2://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('an HTTP/2 dial', () => {
  it("sends its first call's request before the server's SETTINGS arrive", async () => {
    let requestBeforeSettings: () => void;
    const seen = new Promise<void>((resolve) => (requestBeforeSettings = resolve));
    const calls = new Set<number>();
    const address = await silentServer(({ type, stream }, socket) => {
      // Stream 1 is the reverse stream (HEADERS only); the call's HEADERS and DATA come on another one.
      if (stream === 1) return;
      if (type === HEADERS) calls.add(stream);
      if (type === DATA && calls.has(stream)) {
        requestBeforeSettings();
        socket.destroy();
      }
    });
    // Waiting for SETTINGS, the dial would end at its connect timeout, the call failing without a request sent.
    const agent = await createAgent({ channels: [http2({ connectTimeoutMs: 2000 })] });
    agents.push(agent);
    const call = agent.send(address, 'echo', 'hi', { timeoutMs: 10_000 }).catch((error: unknown) => error);
    const outcome = await Promise.race([seen.then(() => 'request seen'), call]);
    expect(outcome).toBe('request seen');
    expect(await call).toBeInstanceOf(AgentError); // the server closed the connection
  });

  it(`opens at most ${STREAMS_BEFORE_SETTINGS} streams less the channel's margin before the server's SETTINGS, then follows them`, async () => {
    const streams = new Set<number>();
    let channelLimitBefore: number | undefined = -1;
    let client: Agent;
    let settled: (counts: { before: number; after: number }) => void;
    const counted = new Promise<{ before: number; after: number }>((resolve) => (settled = resolve));
    const limitBefore = STREAMS_BEFORE_SETTINGS - Math.ceil(STREAMS_BEFORE_SETTINGS * 0.2);
    let settingsSent = false;
    const address = await silentServer(({ type, flags, stream }, socket) => {
      if (type === HEADERS) streams.add(stream);
      if (!settingsSent && streams.size === limitBefore) {
        // The server's SETTINGS now (a limit of 10 streams at once), and nothing before them: a server's first frame
        // must be its SETTINGS, so their ACK is what tells that every stream opened before them has arrived.
        settingsSent = true;
        channelLimitBefore = client.channels()[0]!.streamLimit;
        const setting = Buffer.alloc(6);
        setting.writeUInt16BE(SETTINGS_MAX_CONCURRENT_STREAMS, 0);
        setting.writeUInt32BE(10, 2);
        socket.write(frame(SETTINGS, 0, setting));
      } else if (type === SETTINGS && flags === ACK && settingsSent) {
        settled({ before: streams.size, after: client.channels()[0]!.streamLimit! });
        socket.destroy();
      }
    });
    // One session: the 121 calls the first cannot take wait for it rather than open a second one.
    client = await createAgent({ channels: [http2({ connectTimeoutMs: 2000 })], maxChannelsPerPeer: 1 });
    agents.push(client);
    // The calls fail once the server goes (the agent's close ends the ones still waiting); waiting for SETTINGS, the
    // dial would fail them all at its connect timeout with nothing sent.
    const calls = Array.from({ length: 200 }, () => client.send(address, 'echo', 'hi', { timeoutMs: 10_000 }).catch(() => 'failed'));
    const counts = await Promise.race([counted, Promise.all(calls)]);
    // The reverse stream and the calls the channel let go: no more than the assumed limit allows.
    expect(counts).toMatchObject({ before: limitBefore });
    // Meanwhile the pool was not held to nghttp2's assumption: the channel holds the calls past it itself.
    expect(channelLimitBefore).toBeUndefined();
    // The server's own limit once known: 10, less the margin (2), less the reverse stream.
    expect(counts).toMatchObject({ after: 7 });
  });

  it("lets the streams it held for the server's SETTINGS go as soon as they arrive", async () => {
    const streams = new Set<number>();
    let allOpen: () => void;
    const opened = new Promise<void>((resolve) => (allOpen = resolve));
    const limitBefore = STREAMS_BEFORE_SETTINGS - Math.ceil(STREAMS_BEFORE_SETTINGS * 0.2);
    let settingsSent = false;
    const address = await silentServer(({ type, stream }, socket) => {
      if (type === HEADERS) streams.add(stream);
      if (!settingsSent && streams.size === limitBefore) {
        settingsSent = true;
        const setting = Buffer.alloc(6);
        setting.writeUInt16BE(SETTINGS_MAX_CONCURRENT_STREAMS, 0);
        setting.writeUInt32BE(1000, 2);
        socket.write(frame(SETTINGS, 0, setting));
      }
      // The reverse stream and the pool's 128 calls on its one session: none of them ever ends here.
      if (streams.size === 129) allOpen();
    });
    const client = await createAgent({ channels: [http2()], maxChannelsPerPeer: 1 });
    agents.push(client);
    // Held until calls end instead, they would wait for the first ones to fail at their deadline.
    let aCallFailed: (outcome: string) => void;
    const failed = new Promise<string>((resolve) => (aCallFailed = resolve));
    for (let i = 0; i < 200; i++) client.send(address, 'echo', 'hi', { timeoutMs: 5000 }).catch(() => aCallFailed('a call failed first'));
    expect(await Promise.race([opened.then(() => 'all open'), failed])).toBe('all open');
    expect(client.channels()[0]!.streamLimit).toBe(799);
  });
  // The calls past the assumed limit wait in the channel, not in the pool (whose wait hears the call's signal): a
  // server that never sends its SETTINGS (or a peer whose SETTINGS are slow) must not keep them past their end.
  it.each([
    ['signal', 'CANCELLED'],
    ['deadline', 'DEADLINE_EXCEEDED'],
  ] as const)("ends a call held for the server's SETTINGS by its %s, while the server is still silent", async (how, code) => {
    const streams = new Set<number>();
    let allSent: () => void;
    const sent = new Promise<void>((resolve) => (allSent = resolve));
    const limitBefore = STREAMS_BEFORE_SETTINGS - Math.ceil(STREAMS_BEFORE_SETTINGS * 0.2);
    const address = await silentServer(({ type, stream }) => {
      if (type === HEADERS) streams.add(stream);
      if (streams.size === limitBefore) allSent();
    });
    // No keep-alive: the silent server is never found out, only the calls' own ends can end them.
    const client = await createAgent({ channels: [http2({ keepaliveIntervalMs: 0 })], maxChannelsPerPeer: 1 });
    agents.push(client);
    // The calls that get a stream: they wait for a reply that never comes (the agent's close ends them).
    for (let i = 0; i < limitBefore - 1; i++) client.send(address, 'echo', 'hi', { timeoutMs: 60_000 }).catch(() => undefined);
    const stop = new AbortController();
    const held = Array.from({ length: 20 }, () =>
      client.send(address, 'echo', 'hi', how === 'signal' ? { signal: stop.signal, timeoutMs: 60_000 } : { timeoutMs: 300 }).catch((error: unknown) => error),
    );
    await sent;
    stop.abort();
    // Without its own end, a held call waits for the SETTINGS or a slot, and here neither ever comes.
    const outcomes = await Promise.all(held);
    for (const outcome of outcomes) expect(outcome).toMatchObject({ code });
    expect(streams.size).toBe(limitBefore); // none of them opened a stream
  });
  // A server that ends the session before its SETTINGS: a GOAWAY first (not a SETTINGS: nghttp2 takes it as a
  // connection error) or a bare close. Every call, those with a stream and those held for the SETTINGS, ends with a
  // typed error, at once, not at its deadline.
  it.each(['goaway', 'close'] as const)("ends every call, held or sent, when the server's %s comes before its SETTINGS", async (how) => {
    const streams = new Set<number>();
    const limitBefore = STREAMS_BEFORE_SETTINGS - Math.ceil(STREAMS_BEFORE_SETTINGS * 0.2);
    const address = await silentServer(({ type, stream }, socket) => {
      if (type === HEADERS) streams.add(stream);
      if (streams.size !== limitBefore) return;
      if (how === 'close') return void socket.destroy();
      const goaway = Buffer.alloc(8); // last stream 0, code ENHANCE_YOUR_CALM (11)
      goaway.writeUInt32BE(11, 4);
      socket.write(frame(GOAWAY, 0, goaway));
    });
    const client = await createAgent({ channels: [http2({ keepaliveIntervalMs: 0 })], maxChannelsPerPeer: 1 });
    agents.push(client);
    const calls = Array.from({ length: 120 }, () => client.send(address, 'echo', 'hi', { timeoutMs: 60_000 }).catch((error: unknown) => error));
    const outcomes = await Promise.all(calls);
    for (const outcome of outcomes) expect(outcome).toBeInstanceOf(AgentError);
    expect(outcomes.map((o) => (o as AgentError).code).filter((code) => code === 'DEADLINE_EXCEEDED')).toEqual([]);
  });
});
