/**
 * What one MCP session may leave waiting to be sent because its peer does not read (docs/security.md, "MCP").
 * A server stops reading the client's messages while its answers over these wait (backpressure: the client's
 * `send` waits); a client closes the session with RESOURCE_EXHAUSTED once its answers to the server's requests
 * over these wait (a client never stops reading: a server that waits for the client's reading could then never
 * be read, and both would wait).
 */
export const MAX_UNSENT_MCP_BYTES = 1024 * 1024;
/** At most this many messages wait unsent (small ones cost their objects and promises more than their text). */
export const MAX_UNSENT_MCP_MESSAGES = 1024;
