import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { createAgent, type Agent, type AgentOptions, type Transport } from '@agentlink/core';
import { webSocket } from '@agentlink/ws';
import { vi } from 'vitest';

const started: Agent[] = [];

/** An agent listening on wss://127.0.0.1 (port 0 unless given), closed by `closeAgents`. */
export async function wsAgent(options: Partial<AgentOptions> & { port?: number } = {}): Promise<Agent> {
  const { port = 0, ...rest } = options;
  const agent = await createAgent({ ...rest, channels: [webSocket({ port, host: '127.0.0.1' })] });
  started.push(agent);
  return agent;
}

/** An agent that only dials; with `dials`, every dial it makes is counted there. */
export async function dialOnlyAgent(options: Partial<AgentOptions> = {}, dials?: DialWatch): Promise<Agent> {
  const agent = await createAgent({ ...options, channels: [dials ? watchedWebSocket(dials) : webSocket({})] });
  started.push(agent);
  return agent;
}

export async function closeAgents(): Promise<void> {
  // Back to real timers first: closing waits on sockets, and a fake clock nobody advances must not hold it.
  vi.useRealTimers();
  await Promise.all(started.splice(0).map((a) => a.close()));
}

/** The port an agent listens on. */
export function portOf(agent: Agent): number {
  return Number(new URL(agent.addresses[0]!.split('@')[1]!).port);
}

/**
 * A port nothing listens on: the OS hands one out for a throwaway server, which is closed at once. Another
 * process could bind it before the test is done with it, but bind(0) spreads ports over the ~28k ephemeral
 * range in no fixed order, so it is rarely handed out again within the second a test needs; and unlike a
 * privileged port (1), an unprivileged user can later start the peer on it.
 */
export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

// ---- a clock the test drives ---------------------------------------------------------------------------

/**
 * Fakes the clocks agentlink reads (deadlines, backoff, breakers, token buckets, idle close, health pings) so
 * the test moves time with `vi.advanceTimersByTimeAsync`. Sockets still run on real time: node's own socket
 * and TLS timers are internal and not faked, and neither is setImmediate, which `ioTurn` needs.
 */
export function useFakeClock(toFake: FakeClock[] = ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance']): void {
  vi.useFakeTimers({ toFake });
}
type FakeClock = 'setTimeout' | 'clearTimeout' | 'setInterval' | 'clearInterval' | 'Date' | 'performance';

/** One turn of the real event loop: every promise chain that needs no I/O has settled after it. */
export const ioTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** How `promise` stands after one turn of the event loop, i.e. whether it settled without I/O or a timer. */
export async function settledWithoutIo<T>(promise: Promise<T>): Promise<{ state: 'fulfilled'; value: T } | { state: 'rejected'; reason: unknown } | { state: 'pending' }> {
  const pending = { state: 'pending' } as const;
  return Promise.race([
    promise.then(
      (value) => ({ state: 'fulfilled', value }) as const,
      (reason: unknown) => ({ state: 'rejected', reason }) as const,
    ),
    ioTurn().then(() => pending),
  ]);
}

/** A count tests wait on: `reached(n)` resolves once `add` was called n times. */
export class Tally {
  count = 0;
  private waiters: Array<{ n: number; resolve(): void }> = [];

  add(): void {
    this.count++;
    this.waiters = this.waiters.filter((w) => {
      if (w.n > this.count) return true;
      w.resolve();
      return false;
    });
  }

  reached(n: number): Promise<void> {
    if (this.count >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }
}

/** Dials of a `dialOnlyAgent`, as they start and end. */
export interface DialWatch {
  started: Tally;
  opened: Tally;
  failed: Tally;
}

export function dialWatch(): DialWatch {
  return { started: new Tally(), opened: new Tally(), failed: new Tally() };
}

function watchedWebSocket(dials: DialWatch): Transport {
  const inner = webSocket({});
  return {
    ...inner,
    dial(url, context) {
      dials.started.add();
      const dialled = inner.dial(url, context);
      dialled.then(
        () => dials.opened.add(),
        () => dials.failed.add(),
      );
      return dialled;
    },
  };
}

/** An agent dials a peer up to this many times per call before it gives up on it (core's peer dialer). */
export const DIAL_ATTEMPTS = 3;

/**
 * Steps the fake clock through the next `count` backoffs of the agent's dialer, each as soon as the dialer has set
 * it (it says so on `agentlink:dial:error`, with the delay it drew): the clock moves by exactly that delay, never
 * on to another timer (a call's deadline) that happens to be due first.
 */
export function stepDialBackoffs(count: number): Promise<void> {
  const delays: number[] = [];
  let wake: (() => void) | undefined;
  const onError = (message: unknown): void => {
    const { retryInMs } = message as { retryInMs?: number };
    if (retryInMs === undefined) return;
    delays.push(retryInMs);
    wake?.();
  };
  subscribe('agentlink:dial:error', onError);
  const step = async (): Promise<void> => {
    try {
      for (let stepped = 0; stepped < count; stepped++) {
        while (delays.length === 0) await new Promise<void>((resolve) => (wake = resolve));
        await vi.advanceTimersByTimeAsync(delays.shift()!);
      }
    } finally {
      unsubscribe('agentlink:dial:error', onError);
    }
  };
  return step();
}

/**
 * Runs `call` to a port nobody listens on and steps the fake clock through the dialer's backoffs (under 50, then
 * under 100 ms, full jitter), so the call fails after its third refused dial. Resolves with what the call
 * rejected with.
 */
export async function throughRefusedDials(dials: DialWatch, call: () => Promise<unknown>): Promise<unknown> {
  const before = dials.failed.count;
  const stepped = stepDialBackoffs(DIAL_ATTEMPTS - 1);
  const outcome = call().then(
    (value) => ({ value }),
    (error: unknown) => error,
  );
  await stepped;
  await dials.failed.reached(before + DIAL_ATTEMPTS);
  return outcome;
}

/** A gate calls wait on until the test opens it. */
export function gate(): { wait: Promise<void>; open(): void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}
