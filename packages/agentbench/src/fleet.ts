import { createAgent, type Agent, type Transport } from '@agentlink/core';
import { timed } from './stats.js';

export interface FleetResult {
  subject: string;
  agents: number;
  /** All agents connect at once (TLS handshakes included): wall time until every one answered a ping. */
  connectAllMs: number;
  /** Every agent then makes 5 sequential 1 KB calls, all agents at once. */
  callsPerSecond: number;
  /** The serving process's RSS growth per connected, idle peer (measured from 100 peers up: below, noise). */
  rssPerPeerKiB: number | null;
  bytes: number;
}

/** N logical agents (each with its own key and connection) against one serving agent. */
export async function measureFleet(
  subject: string,
  address: string,
  transport: () => Transport,
  serverRss: () => Promise<number>,
  count: number,
): Promise<FleetResult> {
  const rssBefore = await serverRss();
  const agents: Agent[] = [];
  try {
    for (let i = 0; i < count; i++) agents.push(await createAgent({ channels: [transport()], defaultTimeoutMs: 60_000 }));
    const connectAllMs = await timed(() => Promise.all(agents.map((agent) => agent.ping(address, { timeoutMs: 60_000 }))));
    const payload = Buffer.alloc(1024, 5);
    const callsMs = await timed(() =>
      Promise.all(
        agents.map(async (agent) => {
          for (let i = 0; i < 5; i++) await agent.send(address, 'echo', payload);
        }),
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, 300)); // idle: let the server settle
    const rssAfter = await serverRss();
    return {
      subject,
      agents: count,
      connectAllMs,
      callsPerSecond: (count * 5 * 1000) / callsMs,
      rssPerPeerKiB: count >= 100 ? (rssAfter - rssBefore) / 1024 / count : null,
      bytes: count * 5 * 2 * payload.length,
    };
  } finally {
    await Promise.all(agents.map((agent) => agent.close()));
  }
}
