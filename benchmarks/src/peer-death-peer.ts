/**
 * The peer that peer-death.ts kills and restarts: argv[2] channel kind (ws | http2 | quic), argv[3] key file,
 * argv[4] port (0 = any). Serves `echo` and `tokens` (one item per 10 ms), prints one JSON line { address }
 * when listening, exits when its stdin closes. Default channel settings: the figures are the defaults'.
 */
import { createAgent, loadIdentity, type Transport } from '@agentlink/core';
import { http2 } from '@agentlink/http2';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';

const [kind, keyFile, port] = process.argv.slice(2);
const listen = { port: Number(port), host: '127.0.0.1' };
const channel: Transport = kind === 'ws' ? webSocket(listen) : kind === 'http2' ? http2(listen) : quic(listen);
const agent = await createAgent({ identity: await loadIdentity(keyFile!), channels: [channel] });
agent.handle('echo', (body: unknown) => body);
agent.handleStream('tokens', async function* (_body: unknown, ctx) {
  for (let i = 0; ; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    if (ctx.signal.aborted) return;
    yield i;
  }
});
process.stdout.write(`${JSON.stringify({ address: agent.addresses[0] })}\n`);
process.stdin.resume();
process.stdin.on('end', () => void agent.close().then(() => process.exit(0)));
