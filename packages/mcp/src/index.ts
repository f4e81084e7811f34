export { AgentlinkClientTransport, DEFAULT_MCP_METHOD } from './client-transport.js';
export type { McpClientTransportOptions } from './client-transport.js';
export { AgentlinkServerTransport, authInfoOf, serveMcp } from './server-transport.js';
export type { McpServerLike, ServeMcpOptions } from './server-transport.js';
export { MAX_UNSENT_MCP_BYTES, MAX_UNSENT_MCP_MESSAGES } from './limits.js';
export { MAX_MCP_JSON_CONTAINERS, MAX_MCP_JSON_DEPTH } from './json-shape.js';
export { MAX_MCP_REQUESTS_IN_FLIGHT, PeerRequests, TOO_MANY_MCP_REQUESTS } from './requests-in-flight.js';
