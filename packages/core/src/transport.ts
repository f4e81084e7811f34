/**
 * The transport SPI of agentlink, for channel authors: the contract a channel package implements
 * ({@link Transport}, {@link Channel}, {@link ChannelStream}), the contexts core hands it, the helpers every
 * channel shares (TLS with agent-key authentication, listener limits and refusals, a multiplexer for
 * transports without native streams, the wire codec for tests). Applications use `@agentlink/core`.
 *
 * @packageDocumentation
 */
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
export { errorCodeFromNumber, errorCodeToNumber } from './errors.js';
export { closeCodeOf, peerCloseError, RETIRED_CLOSE_CODE } from './retired-close.js';
export { agentIdOfCertificate, authenticatePeer, secureContextOf, selfSignedCertificate } from './identity/certificate.js';
export type { PeerCertificateSource, TlsCredentials } from './identity/certificate.js';
export { MuxedChannel } from './mux/muxed-channel.js';
export { muxOverStream } from './mux/mux-over-stream.js';
export { MAX_MUX_BODY, MUX_HEADER_BYTES } from './mux/mux-frame.js';
export type { MessagePipe, MuxedChannelInit } from './mux/muxed-channel.js';
export { resolveMuxOptions, type MuxOptions, type ResolvedMuxOptions } from './mux/mux-options.js';
export { DEFAULT_MAX_FRAME_SIZE, FRAME_HEADER_BYTES, decodePayload, encodeFrame } from './wire/codec.js';
export { FrameDecoder } from './wire/frame-decoder.js';
export { WRITTEN } from './wire/written.js';
export { PIPE_HEADROOM, claimHeadroom } from './wire/frame-slab.js';
export { MessageType } from './wire/messages.js';
export type { WireMessage } from './wire/messages.js';
export type { DecodeLimits } from './wire/msgpack-shape.js';
export { abortReason } from './util/abort.js';
export { ChunkQueue, type ChunkSink } from './util/chunk-queue.js';
export { ConnectionAdmission, DEFAULT_LISTENER_LIMITS, resolveListenerLimits } from './listener/listener-limits.js';
export { addressGroup } from './listener/address-group.js';
export type { AdmissionRefusal, AdmissionTicket, ListenerLimits } from './listener/listener-limits.js';
export { refusalKey } from './listener/refusal.js';
export type { Refusal, RefusalStage } from './listener/refusal.js';
export { TlsListenerGuard, addressOf, evictionReason } from './listener/tls-listener-guard.js';
export type { ActivityReporting, TlsListenerGuardOptions } from './listener/tls-listener-guard.js';
export { MIN_IDLE_MS_BEFORE_EVICTION } from './listener/connection-groups.js';
export type { ConnectionActivity } from './listener/connection-groups.js';
export { integerInRange, MAX_TIMER_MS, nonNegativeInteger, nonNegativeNumber, positiveInteger, positiveNumber } from './util/options.js';
