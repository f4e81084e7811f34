import { describe, expect, it } from 'vitest';
import { watchRequestHandlers } from '../src/handler-watch.js';
import { RequestsInFlight } from '../src/requests-in-flight.js';

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
});
