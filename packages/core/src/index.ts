export { AgentError, ERROR_CODES, errorCodeFromNumber, errorCodeToNumber, isErrorCode, toAgentError } from './errors.js';
export type { ErrorCode } from './errors.js';
export { AGENT_ID_LENGTH, agentIdFromPublicKey, isAgentId, parseAgentId, publicKeyFromAgentId } from './identity/agent-id.js';
export type { AgentId } from './identity/agent-id.js';
export { Identity, publicKeyObject, rawPublicKey, verifySignature } from './identity/identity.js';
export { loadIdentity, loadOrCreateIdentity, saveIdentity } from './identity/key-file.js';
export { agentIdOfCertificate, authenticatePeer, secureContextOf, selfSignedCertificate } from './identity/certificate.js';
export type { PeerCertificateSource, TlsCredentials } from './identity/certificate.js';
export type {
  Channel,
  ChannelKind,
  ChannelPath,
  ChannelStream,
  DialContext,
  ListenContext,
  Listener,
  OpenStreamOptions,
  Transport,
  TransportContext,
} from './channel.js';
export { MuxedChannel } from './mux/muxed-channel.js';
export { muxOverStream } from './mux/mux-over-stream.js';
export type { MessagePipe, MuxedChannelInit, MuxOptions } from './mux/muxed-channel.js';
export { DEFAULT_MAX_FRAME_SIZE, FRAME_HEADER_BYTES, decodePayload, encodeFrame, encodeFrameSegments } from './wire/codec.js';
export { FrameDecoder } from './wire/frame-decoder.js';
export { DEFAULT_DECODE_LIMITS, MAX_CONTAINERS_PER_FRAME, MAX_NESTING_DEPTH, checkMsgpackShape } from './wire/msgpack-shape.js';
export type { DecodeLimits } from './wire/msgpack-shape.js';
export { FramedStream } from './wire/framed-stream.js';
export { MessageType, PRIORITIES } from './wire/messages.js';
export type { CallMode, Priority, WireMessage } from './wire/messages.js';
export { Agent, createAgent } from './agent/agent.js';
export type { AgentOptions, AgentStats, PathInfo } from './agent/agent.js';
export type { AgentPlugin } from './agent/plugin.js';
export type { AuthorizePeer, GateOptions } from './agent/connection-gate.js';
export type { CallOptions } from './agent/outbound-call.js';
export type { CallContext, DuplexHandler, StreamHandler, TunnelHandler, UnaryHandler } from './agent/handlers.js';
export type { DuplexCall } from './agent/duplex.js';
export { fromReadableStream, toReadableStream } from './agent/web-streams.js';
export { fallback, parallel, race, raceStream } from './agent/compose.js';
export type { ParallelOptions } from './agent/compose.js';
export type { ToReadableStreamOptions } from './agent/web-streams.js';
export { formatPeerAddress, parsePeerReference } from './agent/peer-address.js';
export type { PeerReference } from './agent/peer-address.js';
export { abortReason, raceSignal } from './util/abort.js';
export { ChunkQueue } from './util/chunk-queue.js';
export { composeInterceptors, tapHandler } from './agent/interceptor.js';
export type { CallControl, CallHandler, CallInfo, Dispatch, HandlerTaps, Interceptor } from './agent/interceptor.js';
export type { ChannelStats, PoolLimits, PoolStats } from './agent/channel-pool.js';
export { PRIORITY_WEIGHTS, WeightedPriorityQueue } from './scheduler/priority-queue.js';
export { diagnosticChannels } from './diagnostics.js';
export { ConnectionAdmission, DEFAULT_LISTENER_LIMITS, resolveListenerLimits } from './listener/listener-limits.js';
export type { AdmissionRefusal, ListenerLimits } from './listener/listener-limits.js';
export { refusalKey } from './listener/refusal.js';
export { TlsListenerGuard, addressOf } from './listener/tls-listener-guard.js';
export type { TlsListenerGuardOptions } from './listener/tls-listener-guard.js';
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
