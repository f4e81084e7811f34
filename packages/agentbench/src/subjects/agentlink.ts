import { createAgent, type Agent, type Transport } from '@agentlink/core';
import type { Session, Subject } from './subject.js';

/**
 * An agentlink channel, measured through the public Agent API (send / stream), as users call it. One client
 * agent (its key, certificate and socket made once, as in an application); each session is a fresh channel.
 */
export function agentlinkSubject(name: string, baseline: string, address: string, transport: () => Transport): Subject {
  let agent: Promise<Agent> | undefined;
  return {
    name,
    baseline,
    async connect(): Promise<Session> {
      agent ??= createAgent({ channels: [transport()], maxFrameSize: 64 * 1024 * 1024, defaultTimeoutMs: 120_000 });
      const client = await agent;
      // No ping first: the first call dials (as in an application), so a connect sample has one round trip, as raw's.
      return {
        async echo(payload) {
          const reply = await client.send<Uint8Array>(address, 'echo', payload);
          if (reply.length !== payload.length) throw new Error(`${name}: echo of ${payload.length} bytes came back as ${reply.length}`);
        },
        async download(totalBytes, chunkBytes, pacing) {
          let received = 0;
          const request = { total: totalBytes, chunk: chunkBytes, delayMs: pacing?.delayMs ?? 0 };
          for await (const chunk of client.stream<Uint8Array>(address, 'download', request)) {
            received += chunk.length;
            pacing?.onData?.(chunk.length);
          }
          return received;
        },
        async close() {
          await Promise.all(client.channels().map((channel) => channel.close()));
        },
      };
    },
    async dispose() {
      const disposed = agent;
      agent = undefined; // a later connect() starts afresh
      await (await disposed)?.close();
    },
  };
}
