import { describe, expect, it } from 'vitest';
import { watchRequestHandlers } from '../src/handler-watch.js';
import { MAX_MCP_REQUESTS_IN_FLIGHT, PeerRequests, RequestsInFlight } from '../src/requests-in-flight.js';

describe('requests in flight', () => {
  it('unwatched, a cancel frees the slot at once; watched, once the handler of that id returned', () => {
    const unwatched = new RequestsInFlight();
    unwatched.admit(1);
    unwatched.cancelled(1);
    expect(unwatched.size).toBe(0);

    const watched = new RequestsInFlight();
    watched.watchHandlers();
    watched.admit(1);
    watched.admit(2);
    watched.started(1);
    watched.cancelled(2); // its handler had not started: nothing runs for it
    expect(watched.size).toBe(1);
    watched.cancelled(1);
    expect(watched.size).toBe(1); // the handler runs on
    watched.ended(1);
    expect(watched.size).toBe(0);
    watched.ended(1); // nothing left to give back
    watched.settled(1);
    expect(watched.size).toBe(0);
  });

  it("wraps the SDK's handlers as they are looked up (the fallback too), and watches nothing of another shape", async () => {
    expect(watchRequestHandlers({}, () => undefined, () => undefined)).toBe(false);
    const events: string[] = [];
    const table = new Map<string, (request: { id: number }) => unknown>([['tools/call', async (request) => `result ${request.id}`]]);
    const protocol = { _requestHandlers: table, fallbackRequestHandler: () => { throw new Error('no such method'); } };
    expect(watchRequestHandlers({ server: protocol }, (id) => events.push(`started ${id}`), (id) => events.push(`ended ${id}`))).toBe(true);
    const handler = table.get('tools/call') as (request: { id: number }, extra: unknown) => Promise<unknown>;
    expect(await handler({ id: 7 }, {})).toBe('result 7');
    const fallback = table.get('unknown') as (request: { id: number }, extra: unknown) => unknown;
    expect(() => fallback({ id: 8 }, {})).toThrow('no such method');
    expect(events).toEqual(['started 7', 'ended 7', 'started 8', 'ended 8']);
  });

  it("a closed session's running handlers keep their peer's slots until they return; the rest are freed", () => {
    const peers = new PeerRequests();
    const first = new RequestsInFlight({ peers, peer: 'a' });
    first.watchHandlers();
    for (let id = 0; id < MAX_MCP_REQUESTS_IN_FLIGHT; id++) first.admit(id);
    for (let id = 0; id < MAX_MCP_REQUESTS_IN_FLIGHT - 1; id++) first.started(id); // the last never started
    expect(peers.of('a')).toBe(MAX_MCP_REQUESTS_IN_FLIGHT);
    first.close();
    expect(first.admit('late')).toBe(false); // a closed session takes nothing
    expect(peers.of('a')).toBe(MAX_MCP_REQUESTS_IN_FLIGHT - 1);

    const second = new RequestsInFlight({ peers, peer: 'a' });
    expect(second.admit('x')).toBe(true); // the one that never started was freed
    expect(second.admit('y')).toBe(false); // the handlers of the closed session run on: the peer is at the bound
    expect(new RequestsInFlight({ peers, peer: 'b' }).admit('y')).toBe(true); // another peer counts its own
    first.ended(0);
    expect(second.admit('y')).toBe(true);
    second.settled('x');
    second.settled('y');
    for (let id = 1; id < MAX_MCP_REQUESTS_IN_FLIGHT - 1; id++) first.ended(id);
    expect(peers.of('a')).toBe(0);
    expect(first.size).toBe(0);
  });
});
