/**
 * An agent process for the NAT lab, run inside a namespace. argv[2] is JSON:
 *   { mode: 'serve', rendezvous }                     serves echo and tokens; prints { ready, id, nat }
 *   { mode: 'call', rendezvous, target, tokens? }     calls the target by bare AgentId; prints what it measured
 * With `tokens`, the caller then streams tokens (10 ms apart), printing { streaming } after the first and
 * { done, … } at the end, with every path event seen meanwhile. The stream ends on an event, not a clock: at the
 * first direct path the caller asks the server for `tokensAfterUpgrade` more tokens and then the end (a call that
 * itself goes over the new path); `tokens` is only the ceiling, reached when no upgrade comes.
 *   { mode: 'measure', rendezvous, target, runs }    `runs` times: a fresh caller agent (new identity, new port, so
 *                                                    no pool, NAT mapping or punch history is reused) registers,
 *                                                    then times its first call; prints { run, ttfbMs, path } each
 *                                                    (with awaitPunch, a relayed run waits ≤ 3 s for the punch);
 *                                                    without `runs`, one run per target AgentId read from stdin
 *   { mode: 'serve-fresh', rendezvous }              serves echo from a fresh agent (new identity, new port); each
 *                                                    stdin line replaces it with another; prints { ready, id }
 */
import { createInterface } from 'node:readline';
import { createAgent, type Agent } from '@agentlink/core';
import { reach, type PathEvent } from '@agentlink/nat';
import { quic } from '@agentlink/quic';
import { webSocket } from '@agentlink/ws';

interface Args {
  mode: 'serve' | 'serve-fresh' | 'call' | 'measure';
  rendezvous: string;
  target?: string;
  tokens?: number;
  /** Tokens the server still sends once the caller has seen the path upgrade (default 100). */
  tokensAfterUpgrade?: number;
  upgradeIntervalMs?: number;
  runs?: number;
  awaitPunch?: boolean;
  /** The QUIC port (default 7000, which a full-cone router forwards); 0 gives a fresh NAT mapping each start. */
  port?: number;
}

async function waitFor(condition: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
}

const args = JSON.parse(process.argv[2]!) as Args;
const print = (value: unknown): boolean => process.stdout.write(`${JSON.stringify(value)}\n`);

/** One first call from a fresh caller agent (new identity, new port: no pool, NAT mapping or punch history reused). */
async function measureOnce(run: number, target: string): Promise<void> {
  const q = quic({ port: 0, host: '0.0.0.0', idleTimeoutMs: 5000 });
  const nat = reach({ rendezvous: args.rendezvous, quic: q, heartbeatMs: 1000, punchTimeoutMs: 2500, upgradeIntervalMs: 1000 });
  const agent = await createAgent({ channels: [q, webSocket()], plugins: [nat], defaultTimeoutMs: 20_000 });
  const events: PathEvent[] = [];
  nat.on('path', (e) => events.push(e));
  const started = performance.now();
  await agent.send(target, 'echo', 'first byte');
  const ttfbMs = performance.now() - started;
  const path = await agent.pathTo(target);
  // The punch may still be under way beside a relay that won: give it its budget, to see whether it lands.
  // Either side's dial may be the one that lands (the other's then arrives as an incoming channel).
  const direct = () => agent.channels(target).some((c) => !c.isClosed && c.path !== 'relay');
  if (args.awaitPunch && path.path === 'relay') await waitFor(direct, 3000);
  print({ run, ttfbMs, path: path.path, upgraded: direct(), nat: nat.nat?.type, events: events.map((e) => ({ path: e.path, ms: Math.round(e.ms) })) });
  await agent.close();
}

/** A serving agent on a fresh port (so a fresh NAT mapping) and identity; `serve-fresh` makes one per stdin line. */
async function serveFresh(): Promise<Agent> {
  const q = quic({ port: 0, host: '0.0.0.0', idleTimeoutMs: 5000 });
  const nat = reach({ rendezvous: args.rendezvous, quic: q, heartbeatMs: 1000, punchTimeoutMs: 2500, upgradeIntervalMs: 1000 });
  const agent = await createAgent({ channels: [q, webSocket()], plugins: [nat], defaultTimeoutMs: 20_000 });
  agent.handle('echo', (x: unknown) => x);
  print({ ready: true, id: agent.id, nat: nat.nat?.type });
  return agent;
}

if (args.mode === 'measure') {
  if (args.runs === undefined) {
    // One run per target read from stdin: the test starts a fresh server for each (warm processes on both sides).
    let run = 0;
    for await (const line of createInterface({ input: process.stdin })) await measureOnce(run++, line.trim());
  } else {
    for (let run = 0; run < args.runs; run++) await measureOnce(run, args.target!);
  }
  print({ measured: true });
  process.exit(0);
}
if (args.mode === 'serve-fresh') {
  let current = await serveFresh();
  for await (const _line of createInterface({ input: process.stdin })) {
    await current.close();
    current = await serveFresh();
  }
  process.exit(0);
}
const q = quic({ port: args.port ?? 7000, host: '0.0.0.0', idleTimeoutMs: 5000 });
const nat = reach({ rendezvous: args.rendezvous, quic: q, heartbeatMs: 1000, punchTimeoutMs: 2500, upgradeIntervalMs: args.upgradeIntervalMs ?? 1000 });
const agent = await createAgent({ channels: [q, webSocket()], plugins: [nat], defaultTimeoutMs: 20_000 });

if (args.mode === 'serve') {
  agent.handle('echo', (x: unknown) => x);
  // One token stream at a time in the lab: `finish-tokens` sets where the current one ends.
  let sent = 0;
  let endAt = Infinity;
  agent.handleStream('tokens', async function* ({ count, delayMs }: { count: number; delayMs: number }) {
    sent = 0;
    endAt = count;
    while (sent < endAt) {
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      yield sent++;
    }
  });
  agent.handle('finish-tokens', ({ more }: { more: number }) => (endAt = Math.min(endAt, sent + more)));
  print({ ready: true, id: agent.id, nat: nat.nat?.type });
} else {
  const events: PathEvent[] = [];
  nat.on('path', (e) => events.push(e));
  const started = performance.now();
  const reply = await agent.send(args.target!, 'echo', 'first byte');
  const ttfbMs = performance.now() - started;
  const path = await agent.pathTo(args.target!);
  print({ reply, ttfbMs, path: path.path, kind: path.kind, rttMs: path.rttMs, nat: nat.nat?.type });
  if (args.tokens) {
    const received: number[] = [];
    let receivedAtUpgrade: number | undefined;
    let total: Promise<number> | undefined;
    nat.on('path', (e) => {
      if (e.path === 'relay' || total) return;
      receivedAtUpgrade = received.length;
      total = agent.send<number>(args.target!, 'finish-tokens', { more: args.tokensAfterUpgrade ?? 100 });
    });
    for await (const token of agent.stream<number>(args.target!, 'tokens', { count: args.tokens, delayMs: 10 })) {
      if (received.length === 0) print({ streaming: true });
      received.push(token);
    }
    const after = await agent.pathTo(args.target!);
    print({
      done: true,
      received: received.length,
      sent: total ? await total : args.tokens,
      receivedAtUpgrade,
      inOrder: received.every((t, i) => t === i),
      events,
      pathAfter: after.path,
      kindAfter: after.kind,
      channels: agent.channels(args.target!).map((c) => ({ kind: c.kind, path: c.path, closed: c.isClosed })),
    });
  }
  await agent.close();
  process.exit(0);
}
