import { AsyncResource } from 'node:async_hooks';
import type { ClientHttp2Session, ClientHttp2Stream, OutgoingHttpHeaders } from 'node:http2';

/**
 * node:http2's `session.request()` binds each new stream's start to an `AsyncResource` (`reqAsync.bind(...)`), and
 * node's `AsyncResource#bind` builds two `deprecate()` wrappers for every bound function (the `asyncResource`
 * getter and setter, deprecated as DEP0172). Each wrapper gets its own prototype, so V8 makes new maps every time:
 * measured 19–23 µs per bind on Node 20.20 and 5–7 µs on Node 24.21 (a plain bind: 0.05–0.35 µs), which was a
 * third of a raw node:http2 client's CPU per request with 32 in flight (nodejs/node#58218, open; the property's
 * removal is nodejs/node#58618).
 *
 * While agentlink's own `request()` runs (synchronously, so nothing else can run in between but what node itself
 * calls), `bind` is one that does what node's does — run `fn` in the resource's async scope, with the caller's
 * `this` when no `thisArg` is given — without the deprecated property, which node's http2 never reads. It is
 * swapped only while the prototype holds node's own deprecating `bind` (recognised by its DEP0172 code), so a
 * `bind` wrapped by an APM agent, or a Node release without the property, is left alone.
 */
const prototype = AsyncResource.prototype as AsyncResource & { bind: AsyncResource['bind'] };
const nodeBind = prototype.bind;
const deprecatingBind = Function.prototype.toString.call(nodeBind).includes('DEP0172');

/** @internal Exported for tests. */
export function bindWithoutDeprecatedProperty(this: AsyncResource, fn: (...args: unknown[]) => unknown, thisArg?: unknown) {
  if (thisArg !== undefined) return this.runInAsyncScope.bind(this, fn, thisArg);
  const resource = this;
  return function (this: unknown, ...args: unknown[]): unknown {
    return resource.runInAsyncScope(fn, this, ...args);
  };
}

/** `session.request(headers)`, without node's per-request DEP0172 cost (see above). */
export function requestStream(session: ClientHttp2Session, headers: OutgoingHttpHeaders): ClientHttp2Stream {
  if (!deprecatingBind || prototype.bind !== nodeBind) return session.request(headers);
  prototype.bind = bindWithoutDeprecatedProperty as AsyncResource['bind'];
  try {
    return session.request(headers);
  } finally {
    prototype.bind = nodeBind;
  }
}

/** @internal For tests: whether this Node's `AsyncResource#bind` is the deprecating one this module avoids. */
export const avoidsDeprecatingBind = deprecatingBind;
