import { channel } from 'node:diagnostics_channel';

/**
 * agentlink's diagnostics_channel events (the undici model): subscribe with
 * `diagnostics_channel.subscribe('agentlink:call:end', (message) => …)`. Publishing costs nothing while no one
 * subscribes. Messages are plain objects; their fields are documented in docs/architecture.md.
 */
export const diagnosticChannels = {
  /** `{ call }` when a call is dispatched (before interceptors). */
  callStart: channel('agentlink:call:start'),
  /** `{ call, durationMs }` when a call completed. */
  callEnd: channel('agentlink:call:end'),
  /** `{ call, error, durationMs }` when a call failed. */
  callError: channel('agentlink:call:error'),
  /** `{ channel }` when the pool gained a channel (dialled or accepted). */
  channelOpen: channel('agentlink:channel:open'),
  /** `{ channel, reason }` when a channel closed. */
  channelClose: channel('agentlink:channel:close'),
  /** `{ peer, from, to }` when a circuit breaker changes state. */
  breakerState: channel('agentlink:breaker:state'),
  /** `{ peer, urls, attempt }` when the agent starts dialling a peer's known addresses (attempt 1, 2, …). */
  dialStart: channel('agentlink:dial:start'),
  /** `{ peer, channel, attempt }` when a dial gave the pool a channel. */
  dialConnected: channel('agentlink:dial:connected'),
  /**
   * `{ peer, error, attempt, retryInMs }` when a dial attempt failed; `retryInMs` is the backoff before the next
   * attempt (already scheduled when this is published), absent when the dial gives up.
   */
  dialError: channel('agentlink:dial:error'),
  /** A `Refusal` (see listener/refusal.ts) when a connection, handshake, channel or stream from a peer was refused. */
  peerRefused: channel('agentlink:peer:refused'),
} as const;
