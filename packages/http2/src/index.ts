export { http2 } from './http2-transport.js';
export type { Http2Options } from './http2-transport.js';
export { Http2Channel } from './http2-channel.js';
