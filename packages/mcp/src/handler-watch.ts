import type { RequestId } from '@modelcontextprotocol/sdk/types.js';

type RequestHandler = (request: { id: RequestId }, extra: unknown) => unknown;

/** What the SDK's `Protocol` (the base of `Server`, inside `McpServer` as `.server`) keeps its request handlers in. */
interface ProtocolInternals {
  _requestHandlers?: unknown;
  fallbackRequestHandler?: RequestHandler;
}

/**
 * Tells `started` and `ended` when each request's handler starts and returns (or throws), by wrapping the
 * handlers as the SDK looks them up (its `_requestHandlers` table, read once per request). The SDK answers nothing
 * to a cancelled request, so without this a transport cannot know when a handler that ignores its abort signal
 * is done. Returns false when the server is not the SDK's as known (another version): nothing is watched then.
 */
export function watchRequestHandlers(server: object, started: (id: RequestId) => void, ended: (id: RequestId) => void): boolean {
  const inner = (server as { server?: unknown }).server;
  const protocol = (typeof inner === 'object' && inner !== null ? inner : server) as ProtocolInternals;
  const table = protocol._requestHandlers;
  if (!(table instanceof Map)) return false;
  const lookUp = table.get.bind(table) as (method: string) => RequestHandler | undefined;
  table.get = (method: string) => {
    const handler = lookUp(method) ?? protocol.fallbackRequestHandler;
    if (typeof handler !== 'function') return handler;
    return (request: { id: RequestId }, extra: unknown): Promise<unknown> => {
      started(request.id);
      let result: unknown;
      try {
        result = handler(request, extra);
      } catch (error) {
        ended(request.id);
        throw error;
      }
      return Promise.resolve(result).finally(() => ended(request.id));
    };
  };
  return true;
}
