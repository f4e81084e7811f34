import { randomInt } from 'node:crypto';
import { AgentError } from '../errors.js';
import type { Channel } from '../channel.js';
import { FramedStream } from '../wire/framed-stream.js';
import { deadlineTimer } from '../util/timer.js';

/** One ping/pong over its own stream on `channel`; resolves with the round trip in milliseconds. */
export async function pingChannel(channel: Channel, maxFrameSize: number, timeoutMs: number, signal?: AbortSignal): Promise<number> {
  const framed = new FramedStream(await channel.openStream({ priority: 'critical' }), maxFrameSize);
  const fail = (reason: AgentError): void => framed.stream.reset(reason);
  // No timer for a deadline past node's longest (Infinity: `defaultTimeoutMs` of an agent whose calls have none):
  // node fires such a timer after 1 ms.
  const timer = deadlineTimer(timeoutMs, () => fail(new AgentError('DEADLINE_EXCEEDED', `no pong within ${timeoutMs} ms`)));
  const onAbort = (): void => fail(signal!.reason as AgentError);
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const started = performance.now();
    const nonce = randomInt(2 ** 31);
    await framed.send({ type: 'ping', nonce });
    const reply = await framed.receive();
    if (reply?.type !== 'pong' || reply.nonce !== nonce) throw new AgentError('PROTOCOL_ERROR', 'bad pong');
    const rtt = performance.now() - started;
    // Both ends, or the stream stays open: QUIC frees a stream only once its peer's end has been read, so a
    // ping that stopped at the pong left one stream counted (and its credit taken) per health check.
    await framed.stream.end();
    const after = await framed.receive();
    if (after !== undefined) throw new AgentError('PROTOCOL_ERROR', `unexpected ${after.type} after the pong`);
    return rtt;
  } catch (error) {
    framed.stream.reset(error instanceof AgentError ? error : new AgentError('UNAVAILABLE', String(error)));
    throw error;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}
