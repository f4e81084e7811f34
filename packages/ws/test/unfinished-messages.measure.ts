/**
 * What a listener holds for strangers that each leave one WebSocket message unfinished (docs/security.md,
 * "WebSocket messages: size"). Not a test (memory figures are measurements, not pass/fail): run with
 *
 *   node --conditions=source --import tsx packages/ws/test/unfinished-messages.measure.ts [connections] [maxPayload]
 *
 * Every connection sends the first fragment of a binary message as large as the listener accepts (maxPayload - 1
 * bytes, FIN clear), then a ping: its pong says the listener read the fragment, which ws now holds until the
 * message ends. Prints the listener's (its own process) heap, ArrayBuffers and RSS after GC with the connections open
 * before and after the fragments (the connections' own cost is in both).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createAgent } from '@agentlink/core';
import { RawWebSocket } from '../../conformance/src/hostile/raw-websocket.js';
import { webSocket } from '../src/index.js';
import { LARGEST_AGENTLINK_MESSAGE } from '../src/web-socket-transport.js';

interface Memory {
  heap: number;
  arrayBuffers: number;
  rss: number;
}
const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);

if (process.argv[2] === '--listener') {
  // The listener, in its own process so that its RSS is its own: prints its address, then its memory after GC
  // for every line read from stdin.
  const gc = (globalThis as { gc?: () => void }).gc!;
  const maxPayload = process.argv[3] ? Number(process.argv[3]) : undefined;
  const server = await createAgent({ channels: [webSocket({ port: 0, ...(maxPayload ? { maxPayload } : {}) })] });
  console.log(server.addresses[0]);
  for await (const _line of createInterface({ input: process.stdin })) {
    for (let i = 0; i < 4; i++) gc();
    const m = process.memoryUsage();
    console.log(JSON.stringify({ heap: m.heapUsed, arrayBuffers: m.arrayBuffers, rss: m.rss }));
  }
  await server.close();
  process.exit(0);
}

const connections = Number(process.argv[2] ?? 512);
const maxPayload = process.argv[3] ? Number(process.argv[3]) : undefined;
const accepted = maxPayload ?? LARGEST_AGENTLINK_MESSAGE;
const script = fileURLToPath(import.meta.url);
const child = spawn(process.execPath, ['--expose-gc', '--conditions=source', '--import', 'tsx', script, '--listener', ...(maxPayload ? [String(maxPayload)] : [])], {
  stdio: ['pipe', 'pipe', 'inherit'],
});
const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
const next = async (): Promise<string> => (await lines.next()).value as string;
const address = await next();
const memory = async (): Promise<Memory> => {
  child.stdin!.write('\n');
  return JSON.parse(await next()) as Memory;
};
const url = new URL(address.slice(address.indexOf('@') + 1));
const peers: RawWebSocket[] = [];
for (let i = 0; i < connections; i++) peers.push(await RawWebSocket.connect(url, url.pathname));
const before = await memory();

const length = accepted - 1;
const fragment = Buffer.concat([Buffer.from([0x02, 0x80 | 127, 0, 0, 0, 0]), Buffer.alloc(4), Buffer.alloc(4), Buffer.alloc(length, 0x41)]);
fragment.writeUInt32BE(length, 6);
const ping = Buffer.from([0x89, 0x80, 0, 0, 0, 0]);
let read = 0;
await Promise.all(
  peers.map(async (peer) => {
    peer.socket.resume();
    peer.socket.write(fragment);
    peer.socket.write(ping);
    // The pong (0x8a) answers the ping sent after the fragment: the listener has read all of it.
    for (;;) {
      const [chunk] = (await once(peer.socket, 'data')) as [Buffer];
      if (chunk.includes(0x8a)) break;
    }
    read++;
  }),
);
const after = await memory();
const open = peers.filter((p) => !p.closed).length;
console.log(
  JSON.stringify({
    node: process.version,
    connections,
    maxPayload: accepted,
    fragmentsRead: read,
    stillOpen: open,
    beforeMiB: { heap: mib(before.heap), arrayBuffers: mib(before.arrayBuffers), rss: mib(before.rss) },
    afterMiB: { heap: mib(after.heap), arrayBuffers: mib(after.arrayBuffers), rss: mib(after.rss) },
    heldPerConnectionKiB: ((after.heap + after.arrayBuffers - before.heap - before.arrayBuffers) / connections / 1024).toFixed(1),
  }),
);
for (const peer of peers) peer.destroy();
child.stdin!.end();
await once(child, 'exit');
