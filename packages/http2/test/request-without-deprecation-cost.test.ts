import { AsyncResource, executionAsyncId } from 'node:async_hooks';
import type { ClientHttp2Session, ClientHttp2Stream } from 'node:http2';
import { createAgent, type Agent } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import { http2 } from '../src/index.js';
import { avoidsDeprecatingBind, bindWithoutDeprecatedProperty, requestStream } from '../src/request-without-deprecation-cost.js';

const nodeBind = AsyncResource.prototype.bind;
const agents: Agent[] = [];
afterEach(async () => {
  AsyncResource.prototype.bind = nodeBind;
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

/** A session whose request() notes which bind node would have used, then answers (or throws). */
function sessionSeeingBind(throws = false) {
  const seen: Array<AsyncResource['bind']> = [];
  const session = {
    request() {
      seen.push(AsyncResource.prototype.bind);
      if (throws) throw new Error('request refused');
      return {} as ClientHttp2Stream;
    },
  } as unknown as ClientHttp2Session;
  return { session, seen };
}

describe("HTTP/2 requests without node's per-request DEP0172 wrappers", () => {
  it('is used exactly when this Node binds with the deprecated asyncResource property', () => {
    const bound = new AsyncResource('probe').bind(() => 0);
    expect(avoidsDeprecatingBind).toBe(Object.getOwnPropertyDescriptor(bound, 'asyncResource') !== undefined);
  });

  it("runs the bound function as node's bind does: in the resource's scope, with the same this, arguments and result", () => {
    const resource = new AsyncResource('agentlink-test');
    const receiver = { name: 'receiver' };
    function record(this: unknown, ...args: unknown[]) {
      return { scope: executionAsyncId(), self: this, args };
    }
    type Recorded = { scope: number; self: unknown; args: unknown[] };
    type Bound = (this: unknown, ...args: unknown[]) => Recorded;
    const bindLikeNode = nodeBind as (this: AsyncResource, fn: typeof record, thisArg?: unknown) => Bound;
    const ours = bindWithoutDeprecatedProperty.call(resource, record) as Bound;
    expect(ours.call(receiver, 1, 'two')).toEqual(bindLikeNode.call(resource, record).call(receiver, 1, 'two'));
    expect(ours.call(receiver, 1).scope).toBe(resource.asyncId());
    const withThis = bindWithoutDeprecatedProperty.call(resource, record, receiver) as Bound;
    expect(withThis(3).self).toBe(receiver);
    expect(withThis(3)).toEqual(bindLikeNode.call(resource, record, receiver)(3));
  });

  it("swaps node's bind only for the request, and puts it back even when the request throws", () => {
    const { session, seen } = sessionSeeingBind();
    requestStream(session, { ':path': '/' });
    expect(seen[0] === nodeBind).toBe(!avoidsDeprecatingBind);
    expect(AsyncResource.prototype.bind).toBe(nodeBind);

    const failing = sessionSeeingBind(true);
    expect(() => requestStream(failing.session, { ':path': '/' })).toThrow('request refused');
    expect(failing.seen[0] === nodeBind).toBe(!avoidsDeprecatingBind);
    expect(AsyncResource.prototype.bind).toBe(nodeBind);
  });

  it("leaves a bind someone else wrapped (an APM agent's) in place, and real calls go through it", async () => {
    let wrappedCalls = 0;
    const wrapped = function (this: AsyncResource, ...args: Parameters<AsyncResource['bind']>) {
      wrappedCalls++;
      return nodeBind.apply(this, args);
    } as AsyncResource['bind'];
    AsyncResource.prototype.bind = wrapped;
    const { session, seen } = sessionSeeingBind();
    requestStream(session, { ':path': '/' });
    expect(seen).toEqual([wrapped]);

    const server = await createAgent({ channels: [http2({ port: 0 })] });
    const client = await createAgent({ channels: [http2()] });
    agents.push(server, client);
    server.handle('echo', (value: string) => value);
    expect(await client.send(server.addresses[0]!, 'echo', 'through the wrapper')).toBe('through the wrapper');
    expect(wrappedCalls).toBeGreaterThan(0);
    expect(AsyncResource.prototype.bind).toBe(wrapped);
  });

  it("an agentlink HTTP/2 call leaves node's own bind in place", async () => {
    const server = await createAgent({ channels: [http2({ port: 0 })] });
    const client = await createAgent({ channels: [http2()] });
    agents.push(server, client);
    server.handle('echo', (value: number) => value);
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => client.send<number>(server.addresses[0]!, 'echo', i)));
    expect(results).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(AsyncResource.prototype.bind).toBe(nodeBind);
  });
});
