import { once } from 'node:events';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import * as ws from 'ws';
import { readFramesFirst } from '../src/frame-reader.js';
import { plainWsPair } from './plain-ws-pair.js';

const closers: Array<() => void> = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

/** A ws server socket (and its raw socket) with a ws client of the zero mask key on the other end, over loopback. */
async function pair(serverOptions: { allowSynchronousEvents: boolean }): Promise<{ socket: ws.WebSocket; raw: Socket; client: ws.WebSocket }> {
  const made = await plainWsPair(serverOptions);
  closers.push(made.close);
  return made;
}

/** Sends, in one socket write, a message in two fragments (ws's to read), a whole one, and a ping; resolves with what the server heard, in order. */
async function heard(socket: ws.WebSocket, raw: Socket, client: ws.WebSocket): Promise<{ messages: string[]; installed: boolean }> {
  const messages: string[] = [];
  const reader = readFramesFirst(socket, raw, { isServer: true, maxPayload: 100_000, onMessage: (data) => messages.push(data.toString()) });
  socket.on('message', (data: Buffer) => messages.push(data.toString()));
  const pinged = once(socket, 'ping');
  // ws's socket writes of one turn leave together (corked): one read at the server, most likely.
  const clientRaw = (client as unknown as { _socket: Socket })._socket;
  clientRaw.cork();
  client.send(Buffer.from('fragment-'), { fin: false });
  client.send(Buffer.from('ed'), { fin: true });
  client.send(Buffer.from('whole'));
  client.ping();
  clientRaw.uncork();
  await pinged;
  await new Promise((resolve) => setImmediate(resolve)); // a deferred 'message' has come by now
  return { messages, installed: reader !== undefined };
}

describe('readFramesFirst where ws is not as it expects', () => {
  it('reads as ws does when ws runs as expected (the reader installed)', async () => {
    const { socket, raw, client } = await pair({ allowSynchronousEvents: true });
    expect(await heard(socket, raw, client)).toEqual({ messages: ['fragment-ed', 'whole'], installed: true });
  });

  it('leaves everything to ws when ws emits its events later (no message overtaken)', async () => {
    const { socket, raw, client } = await pair({ allowSynchronousEvents: false });
    expect(await heard(socket, raw, client)).toEqual({ messages: ['fragment-ed', 'whole'], installed: false });
  });

  it('leaves everything to ws when its Receiver does not say when it refused a write (no Writable `errored`)', async () => {
    const { socket, raw, client } = await pair({ allowSynchronousEvents: true });
    Object.defineProperty((socket as unknown as { _receiver: object })._receiver, 'errored', { value: undefined });
    expect(await heard(socket, raw, client)).toEqual({ messages: ['fragment-ed', 'whole'], installed: false });
  }, 10_000);

  it('leaves everything to ws when another data listener has the name of ws’s (each message heard once)', async () => {
    const { socket, raw, client } = await pair({ allowSynchronousEvents: true });
    raw.prependListener('data', function socketOnData(): void {});
    expect(await heard(socket, raw, client)).toEqual({ messages: ['fragment-ed', 'whole'], installed: false });
  });

  it('leaves everything to ws when its data listener is not found, or its Receiver is missing', async () => {
    const renamed = await pair({ allowSynchronousEvents: true });
    const [wsOnData] = renamed.raw.listeners('data') as Array<(chunk: Buffer) => void>;
    renamed.raw.removeListener('data', wsOnData!);
    renamed.raw.on('data', (chunk: Buffer) => wsOnData!.call(renamed.raw, chunk));
    expect(await heard(renamed.socket, renamed.raw, renamed.client)).toEqual({ messages: ['fragment-ed', 'whole'], installed: false });
    const noReceiver = await pair({ allowSynchronousEvents: true });
    const receiver = (noReceiver.socket as unknown as { _receiver: unknown })._receiver;
    (noReceiver.socket as unknown as { _receiver: unknown })._receiver = undefined;
    const readers = readFramesFirst(noReceiver.socket, noReceiver.raw, { isServer: true, maxPayload: 100_000, onMessage: () => undefined });
    (noReceiver.socket as unknown as { _receiver: unknown })._receiver = receiver;
    expect(readers).toBeUndefined();
    expect(noReceiver.raw.listeners('data').map((listener) => listener.name)).toEqual(['socketOnData']);
  });
});
