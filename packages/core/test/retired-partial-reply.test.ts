import { afterEach, expect, it } from 'vitest';
import { createAgent, type Agent } from '../src/index.js';
import type { Channel, ListenContext } from '../src/transport.js';
import { retiredClose } from '../src/retired-close.js';
import { memoryTransport, type SentFrame } from './memory-transport.js';

const ioTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

/** Far above a stream's first receive window (256 KiB): the reply crosses the pipe over several turns. */
const REPLY_BYTES = 2 * 1024 * 1024;

it("a unary call whose reply had begun to arrive is not resent when the channel closes as retired: the handler ran", async () => {
  // The retired close promises "what I did not answer I never processed"; a reply that was on its way when the
  // channel closed (a closer breaking the rule, or QUIC dropping what a slow path had not delivered yet) proves
  // the handler ran. A unary reply has no items (call-attempt.ts `replied`): the part of its frame that arrived
  // says it.
  const network = new Map<string, ListenContext>();
  const sent: SentFrame[] = [];
  const server = await createAgent({ channels: [memoryTransport(network, 'server')] });
  // The dialler's transport makes both ends of the pipe: it records the server's frames too.
  const client = await createAgent({ channels: [memoryTransport(network, undefined, undefined, sent)] });
  agents.push(server, client);
  let runs = 0;
  server.handle('big', () => {
    runs++;
    return Buffer.alloc(REPLY_BYTES, 7);
  });
  client.addPeer(server.addresses[0]!);
  const call = client.send(server.id, 'big');
  call.catch(() => undefined);
  const replyBytesSent = (): number => sent.filter((f) => f.from === 'listener').reduce((n, f) => n + f.frame.length, 0);
  while (replyBytesSent() < 64 * 1024) await ioTurn();
  await ioTurn(); // the first of them reached the caller
  const [onServer] = server.channels(client.id) as [Channel];
  void onServer.close(retiredClose('retired: test'));
  await expect(call).rejects.toMatchObject({ code: 'UNAVAILABLE' });
  expect(runs).toBe(1);
});
