export { webSocket } from './web-socket-transport.js';
export type { WebSocketOptions } from './web-socket-transport.js';
