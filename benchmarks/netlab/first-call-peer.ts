/**
 * Both ends of the first-call benchmark (first-call.ts), each started inside a lab namespace.
 *   serve <host>:            a QUIC agent answering `echo`; prints its address, runs until stdin ends.
 *   call <address> <repeats>: per repeat, interleaved, a *fresh* caller (new identity, no tickets) and a
 *                            *restarted* caller (an identity that talked to the server before, agent closed and
 *                            created again) each time one idempotent call, from `send` to the answer, with
 *                            `quic({ zeroRtt: true })`; prints one JSON line per sample.
 */
import { createAgent, Identity } from '@agentlink/core';
import { quic, QuicChannel } from '@agentlink/quic';

const [mode, arg, repeatsText] = process.argv.slice(2);

if (mode === 'serve') {
  const server = await createAgent({ channels: [quic({ host: arg, port: 0 })] });
  server.handle('echo', (body: unknown) => body);
  process.stdout.write(`${JSON.stringify({ address: server.addresses[0] })}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => void server.close().then(() => process.exit(0)));
} else {
  const address = arg!;
  const known = Identity.generate();
  const firstCall = async (identity: Identity): Promise<{ ms: number; earlyStreams: number; earlyData: string }> => {
    const caller = await createAgent({ identity, channels: [quic({ zeroRtt: true })], connectTimeoutMs: 10_000 });
    try {
      const started = performance.now();
      await caller.send(address, 'echo', 'x', { idempotent: true });
      const ms = performance.now() - started;
      const [channel] = caller.channels();
      if (channel instanceof QuicChannel) await channel.handshakeEnded();
      const quicChannel = channel instanceof QuicChannel ? channel : undefined;
      const sample = { ms, earlyStreams: quicChannel?.earlyStreams ?? -1, earlyData: quicChannel?.earlyData ?? 'n/a' };
      // One call after the handshake before closing: its answer comes after the listener's new tickets (sent as
      // it sees our Finished), so each run leaves tickets for the next, as a caller that lives longer does.
      await caller.send(address, 'echo', 'after');
      return sample;
    } finally {
      await caller.close();
    }
  };
  await firstCall(known); // the known identity's one full handshake: it now holds the server's tickets
  for (let i = 0; i < Number(repeatsText ?? 10); i++) {
    process.stdout.write(`${JSON.stringify({ kind: 'fresh', ...(await firstCall(Identity.generate())) })}\n`);
    process.stdout.write(`${JSON.stringify({ kind: 'resumed', ...(await firstCall(known)) })}\n`);
  }
}
