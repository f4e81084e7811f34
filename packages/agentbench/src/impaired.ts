import { createAgent, type Transport } from '@agentlink/core';
import type { Impairment } from './impair/impairment.js';
import { tcpProxy } from './impair/tcp-proxy.js';
import { udpProxy } from './impair/udp-proxy.js';

export interface ImpairedResult {
  subject: string;
  streams: number;
  seconds: number;
  mbPerSecond: number;
  bytes: number;
}

/**
 * `streams` concurrent downloads through an impaired path for `seconds`: aggregate MB/s. QUIC's datagrams meet
 * real loss (udpProxy); TCP channels go through a modelled lossy TCP leg (tcpProxy). The wallhack experiment.
 */
export async function measureImpaired(
  subject: string,
  address: string,
  transport: () => Transport,
  impairment: Impairment,
  streams: number,
  seconds: number,
): Promise<ImpairedResult> {
  const at = address.indexOf('@');
  const url = new URL(address.slice(at + 1));
  const target = { host: url.hostname, port: Number(url.port) };
  const proxy = url.protocol === 'quic:' ? await udpProxy(target, impairment) : await tcpProxy(target, impairment);
  url.port = String(proxy.port);
  const viaProxy = `${address.slice(0, at)}@${url.href}`;
  const agent = await createAgent({ channels: [transport()], defaultTimeoutMs: 120_000, connectTimeoutMs: 30_000 });
  let bytes = 0;
  try {
    await agent.ping(viaProxy, { timeoutMs: 30_000 });
    // Streams end at the deadline (a cancel, not waiting for each stream's next chunk on the slow path).
    const stop = new AbortController();
    const timer = setTimeout(() => stop.abort(), seconds * 1000);
    await Promise.all(
      Array.from({ length: streams }, async () => {
        try {
          for await (const chunk of agent.stream<Uint8Array>(viaProxy, 'download', { total: 2 ** 31, chunk: 16 * 1024 }, { signal: stop.signal })) {
            if (!stop.signal.aborted) bytes += chunk.length;
          }
        } catch (error) {
          if (!stop.signal.aborted) throw error;
        }
      }),
    );
    clearTimeout(timer);
    return { subject, streams, seconds, mbPerSecond: bytes / 2 ** 20 / seconds, bytes };
  } finally {
    await agent.close();
    proxy.close();
  }
}
