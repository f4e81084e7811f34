export { quic } from './quic-transport.js';
export type { QuicCongestion, QuicOptions } from './quic-transport.js';
export { QuicChannel } from './quic-channel.js';
export { loadNative, platformTarget } from './native.js';
export type { NativeBinding, NativeConnection, NativeDial, NativeEndpoint, NativeLoad, NativeReadEvent, NativeRefusal, NativeStream } from './native.js';
export { ENGINE_TARGETS, type EngineTarget } from './engine-target.js';
export { ENGINE_OVERRIDE_VARIABLE } from './engine-loader.js';
