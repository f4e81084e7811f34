/**
 * The application API of agentlink: create agents, register handlers, call peers, shape calls with
 * interceptors. Channels (`@agentlink/ws`, `@agentlink/http2`, `@agentlink/quic`) are separate packages; the
 * contract they implement is the transport SPI, `@agentlink/core/transport`.
 *
 * @packageDocumentation
 */
export { AgentError, ERROR_CODES, isErrorCode, toAgentError } from './errors.js';
export type { ErrorCode } from './errors.js';
export { AGENT_ID_LENGTH, agentIdFromPublicKey, isAgentId, parseAgentId, publicKeyFromAgentId } from './identity/agent-id.js';
export type { AgentId } from './identity/agent-id.js';
export { Identity, verifySignature } from './identity/identity.js';
export { loadIdentity, loadOrCreateIdentity, saveIdentity } from './identity/key-file.js';
export type { ChannelKind, ChannelPath, Transport } from './channel.js';
export { PRIORITIES } from './wire/messages.js';
export type { CallMode, Priority } from './wire/messages.js';
export { Agent, createAgent } from './agent/agent.js';
export type { AgentOptions, AgentStats, PathInfo } from './agent/agent.js';
export type { AgentPlugin } from './agent/plugin.js';
export type { AuthorizePeer, GateOptions } from './agent/connection-gate.js';
export type { CallOptions } from './agent/outbound-call.js';
export { MAX_TUNNEL_ACCEPTANCE_BYTES } from './agent/tunnel.js';
export type { TunnelOptions } from './agent/tunnel.js';
export type { CallContext, DuplexHandler, StreamHandler, TunnelAcceptance, TunnelHandler, UnaryHandler } from './agent/handlers.js';
export type { DuplexCall } from './agent/duplex.js';
export { fromReadableStream, toReadableStream } from './agent/web-streams.js';
export { fallback, parallel, race, raceStream } from './agent/compose.js';
export type { ParallelOptions } from './agent/compose.js';
export type { ToReadableStreamOptions } from './agent/web-streams.js';
export { formatPeerAddress, parsePeerReference } from './agent/peer-address.js';
export type { PeerReference } from './agent/peer-address.js';
export { composeInterceptors, tapHandler } from './agent/interceptor.js';
export type { CallControl, CallHandler, CallInfo, Dispatch, HandlerTaps, Interceptor } from './agent/interceptor.js';
export type { ChannelStats, PoolLimits, PoolStats } from './agent/channel-pool.js';
export { diagnosticChannels } from './diagnostics.js';
export { DEFAULT_LISTENER_LIMITS } from './listener/listener-limits.js';
export type { ListenerLimits } from './listener/listener-limits.js';
export type { Refusal, RefusalStage } from './listener/refusal.js';
export { retry } from './middleware/retry.js';
export type { RetryOptions } from './middleware/retry.js';
export { timeout } from './middleware/timeout.js';
export type { TimeoutOptions } from './middleware/timeout.js';
export { CircuitBreaker, circuitBreaker } from './middleware/circuit-breaker.js';
export type { BreakerState, BreakerStateChange, CircuitBreakerOptions } from './middleware/circuit-breaker.js';
export { rateLimit } from './middleware/rate-limit.js';
export { TokenBucket } from './middleware/token-bucket.js';
export type { BucketOptions, RateLimitOptions } from './middleware/rate-limit.js';
export { CallMetrics, LATENCY_BUCKETS_SECONDS } from './middleware/metrics.js';
export type { MetricsSnapshot, PoolStatsSource } from './middleware/metrics.js';
