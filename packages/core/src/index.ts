export { AgentError, ERROR_CODES, errorCodeFromNumber, errorCodeToNumber, isErrorCode, toAgentError } from './errors.js';
export type { ErrorCode } from './errors.js';
export { AGENT_ID_LENGTH, agentIdFromPublicKey, isAgentId, parseAgentId, publicKeyFromAgentId } from './identity/agent-id.js';
export type { AgentId } from './identity/agent-id.js';
export { Identity, publicKeyObject, rawPublicKey, verifySignature } from './identity/identity.js';
export { loadIdentity, loadOrCreateIdentity, saveIdentity } from './identity/key-file.js';
export { agentIdOfCertificate, authenticatePeer, selfSignedCertificate } from './identity/certificate.js';
export type { PeerCertificateSource, TlsCredentials } from './identity/certificate.js';
export type {
  Channel,
  ChannelKind,
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
export { FramedStream } from './wire/framed-stream.js';
export { MessageType, PRIORITIES } from './wire/messages.js';
export type { CallMode, Priority, WireMessage } from './wire/messages.js';
export { Agent, createAgent } from './agent/agent.js';
export type { AgentOptions } from './agent/agent.js';
export type { CallOptions } from './agent/outbound-call.js';
export type { CallContext, StreamHandler, UnaryHandler } from './agent/handlers.js';
export { formatPeerAddress, parsePeerReference } from './agent/peer-address.js';
export type { PeerReference } from './agent/peer-address.js';
export { abortReason, raceSignal } from './util/abort.js';
export { ChunkQueue } from './util/chunk-queue.js';
