import { AgentError, Identity, type AgentId } from '@agentlink/core';
import { encodeFrame, selfSignedCertificate, type Channel, type ChannelStream } from '@agentlink/core/transport';
import type { TransportFactory, ConformanceTarget } from '../target.js';

/** Splits `<AgentId>@<url>` into the key to pin and the URL to dial. */
export function splitAddress(address: string): { peer: AgentId; url: URL } {
  const at = address.indexOf('@');
  return { peer: address.slice(0, at) as AgentId, url: new URL(address.slice(at + 1)) };
}

/**
 * A hostile peer at the transport SPI: a fresh key (anyone can make one), an authenticated channel, and raw byte
 * streams on which it writes whatever it likes. Core's framing and call logic are not involved on its side.
 */
export class RawPeer {
  private constructor(
    readonly identity: Identity,
    readonly channel: Channel,
    private readonly transport: ReturnType<TransportFactory>,
  ) {}

  static async dial(factory: TransportFactory, target: ConformanceTarget, address: string): Promise<RawPeer> {
    const transport = factory(target.dialOptions ?? {});
    const { peer, url } = splitAddress(address);
    const identity = Identity.generate();
    const channel = await transport.dial(url, {
      identity,
      tls: selfSignedCertificate(identity),
      // The attacker serves nothing: calls back to it are refused at once.
      onStream: (stream) => stream.reset(new AgentError('NO_HANDLER', 'a hostile peer serves nothing')),
      expectedPeer: peer,
      signal: AbortSignal.timeout(10_000),
    });
    return new RawPeer(identity, channel, transport);
  }

  openStream(): Promise<ChannelStream> {
    return this.channel.openStream();
  }

  /** Leaves: closes the channel (every stream with it) and the transport. */
  async leave(): Promise<void> {
    await this.channel.close(new AgentError('CLOSED', 'the hostile peer left'));
    await this.transport.close?.();
  }
}

/** The fate of a stream as its reader saw it: the reset code, or 'ended' when the peer ended it normally. */
export type StreamFate = string;

/** Reads a stream to its end (discarding data) and resolves with its fate; never rejects. */
export async function fateOf(stream: ChannelStream): Promise<StreamFate> {
  try {
    while ((await stream.read()) !== undefined);
    return 'ended';
  } catch (error) {
    return error instanceof AgentError ? error.code : String(error);
  }
}

/** A frame header: the u32 big-endian length of a payload that may or may not follow. */
export function frameHeader(declaredBytes: number): Buffer {
  const header = Buffer.alloc(4);
  header.writeUInt32BE(declaredBytes, 0);
  return header;
}

/** A whole frame around raw payload bytes (which need not be valid msgpack). */
export function rawFrame(payload: Uint8Array): Buffer {
  return Buffer.concat([frameHeader(payload.length), payload]);
}

/** A well-formed request frame, as a caller's core would write it. */
export function requestFrame(method: string, body: unknown, mode: 'unary' | 'stream' = 'unary'): Buffer {
  return encodeFrame({ type: 'request', method, timeoutMs: null, priority: 'normal', metadata: {}, body, mode });
}

/** Counts fates: { RESOURCE_EXHAUSTED: 3, ended: 1 }. */
export function tally(fates: readonly StreamFate[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const fate of fates) counts[fate] = (counts[fate] ?? 0) + 1;
  return counts;
}
