import { AgentError, createAgent, type Agent, type CallContext } from '@agentlink/core';
import { webSocket } from '@agentlink/ws';
import { afterEach, describe, expect, it, vi } from 'vitest';

/**
 * A handler's `ctx.signal` brings the call's deadline to a call made with it, while that deadline applies to the
 * call: core stops the deadline once a tunnel is open ("the tunnel lives as long as its owner wants") and once a
 * call is over. A signal used after that (the tunnel's owner calling on, work a handler left running) must not cut
 * the new call to a deadline nothing else holds any more: it was cut to 0 ms, DEADLINE_EXCEEDED at once.
 */
const started: Agent[] = [];
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(started.splice(0).map((agent) => agent.close()));
});

async function agents() {
  const [model, middle, user] = await Promise.all([
    createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] }),
    createAgent({ channels: [webSocket({ port: 0, host: '127.0.0.1' })] }),
    createAgent({ channels: [webSocket({})] }),
  ]);
  started.push(user, middle, model);
  const deadlines: Array<number | undefined> = [];
  model.handle('summarize', (_body: unknown, ctx) => {
    deadlines.push(ctx.deadline);
    return 'short';
  });
  return { model, middle, user, deadlines, modelAddress: model.addresses[0]!, middleAddress: middle.addresses[0]! };
}

describe("a handler's ctx.signal once its deadline no longer applies", () => {
  it("a tunnel's: once open, a call made with it takes its own deadline, not the opening's", async () => {
    const { middle, user, deadlines, modelAddress, middleAddress } = await agents();
    await middle.send(modelAddress, 'summarize', null); // the channel is up before the clock stops
    deadlines.length = 0;
    let opened!: (ctx: CallContext) => void;
    const owner = new Promise<CallContext>((resolve) => (opened = resolve));
    middle.handleTunnel('pipe', (_body: unknown, ctx) => {
      void ctx.signal; // read while opening: marked with the opening's deadline
      return { accept: true, onOpen: () => opened(ctx) };
    });
    const { stream } = await user.openTunnel(middleAddress, 'pipe', null, { timeoutMs: 1_000 });
    const ctx = await owner;
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 5_000); // the tunnel is older than its opening deadline, and still open

    expect(await middle.send(modelAddress, 'summarize', null, { signal: ctx.signal })).toBe('short');
    expect(deadlines).toEqual([Date.now() + 30_000]); // the agent's default, as for any call
    stream.reset(new AgentError('CANCELLED', 'done'));
  });

  it("a handler's that returned: a call made with its signal later is not cut to the past deadline", async () => {
    const { middle, user, deadlines, modelAddress, middleAddress } = await agents();
    await middle.send(modelAddress, 'summarize', null);
    deadlines.length = 0;
    const contexts: CallContext[] = [];
    middle.handle('ack', (_body: unknown, ctx) => {
      void ctx.signal; // read while the call runs
      contexts.push(ctx);
      return 'ok';
    });
    middle.handle('ackUnread', (_body: unknown, ctx) => {
      contexts.push(ctx); // its signal is first read after the call ended
      return 'ok';
    });
    expect(await user.send(middleAddress, 'ack', null, { timeoutMs: 1_000 })).toBe('ok');
    expect(await user.send(middleAddress, 'ackUnread', null, { timeoutMs: 1_000 })).toBe('ok');
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 5_000);

    for (const ctx of contexts) expect(await middle.send(modelAddress, 'summarize', null, { signal: ctx.signal })).toBe('short');
    expect(deadlines).toEqual([Date.now() + 30_000, Date.now() + 30_000]);
  });
});
