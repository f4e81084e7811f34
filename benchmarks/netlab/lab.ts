/**
 * The kernel-level network lab: two network namespaces, `a` (10.99.0.1) and `b` (10.99.0.2), joined only through
 * the forwarder (forwarder.c), which applies one-way delay, jitter without reordering, random loss and a rate
 * limit to every packet in both directions. Real kernel TCP and UDP cross it, so TCP's own congestion control
 * (chosen per namespace) and QUIC's meet the same path. Needs root.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface PathSpec {
  /** One-way delay in each direction, ms. */
  delayMs: number;
  /** Uniform ± jitter on the delay, ms; packets never overtake each other. */
  jitterMs: number;
  /** Random loss per packet in each direction, percent. */
  lossPercent: number;
  /** Rate limit in each direction, Mbit/s (token bucket, drop-tail queue). */
  rateMbit: number;
  /** The drop-tail queue in front of the rate limit, KiB (default ~ 80 ms at 100 Mbit/s). */
  queueKb?: number;
}

export interface ForwarderCounters {
  forwarded: number;
  bytes: number;
  lost: number;
  queueDrops: number;
  ringDrops: number;
}

export interface Lab {
  /** Namespace names, for `ip netns exec`. */
  readonly a: string;
  readonly b: string;
  readonly addressA: string;
  readonly addressB: string;
  /**
   * Sets the TCP congestion control of both hosts' connections to each other, as a route attribute (`congctl`):
   * the per-namespace sysctl refuses algorithms outside the machine-wide allowed list (EPERM for cubic here,
   * where that list is "reno bbr"), a route does not. Node cannot set it per socket.
   */
  setTcpCongestion(name: 'cubic' | 'bbr' | 'reno'): Promise<void>;
  /** Runs a command inside a namespace. */
  exec(ns: string, command: string, args: string[], timeoutMs?: number): Promise<{ stdout: string; stderr: string }>;
  /** Starts a long-running process inside a namespace. */
  spawn(ns: string, command: string, args: string[]): ChildProcess;
  /** The forwarder's counters so far (a→b, b→a), forwarding going on: take two and subtract for one figure's. */
  counters(): Promise<{ ab: ForwarderCounters; ba: ForwarderCounters }>;
  /** Stops the forwarder and removes both namespaces; returns the forwarder's counters (a→b, b→a). */
  close(): Promise<{ ab: ForwarderCounters; ba: ForwarderCounters }>;
}

export const FORWARDER_SOURCE = fileURLToPath(new URL('./forwarder.c', import.meta.url));

/** Compiles the forwarder with gcc (about a second) unless an up-to-date binary exists. */
export async function buildForwarder(output = '/tmp/agentlink-netlab-forwarder'): Promise<string> {
  if (existsSync(output) && statSync(output).mtimeMs >= statSync(FORWARDER_SOURCE).mtimeMs) return output;
  await run('gcc', ['-O2', '-Wall', '-o', output, FORWARDER_SOURCE]);
  return output;
}

let labs = 0;

export async function startLab(path: PathSpec, forwarderBinary?: string): Promise<Lab> {
  const binary = forwarderBinary ?? (await buildForwarder());
  const tag = `${process.pid % 100000}${labs++}`;
  const a = `nla${tag}`;
  const b = `nlb${tag}`;
  const addressA = '10.99.0.1';
  const addressB = '10.99.0.2';
  const ip = (...args: string[]) => run('ip', args);
  await ip('netns', 'add', a);
  await ip('netns', 'add', b);
  let forwarder: ChildProcess | undefined;
  const teardown = async (): Promise<void> => {
    await ip('netns', 'del', a).catch(() => undefined);
    await ip('netns', 'del', b).catch(() => undefined);
  };
  try {
    await ip('-n', a, 'link', 'set', 'lo', 'up');
    await ip('-n', b, 'link', 'set', 'lo', 'up');
    // Niced so that, on a busy machine, packets leave at their due time rather than when the scheduler gets to it.
    forwarder = spawn('nice', ['-n', '-10', binary,
      '--ns-a', `/run/netns/${a}`, '--ns-b', `/run/netns/${b}`, '--dev', 'lab0',
      '--delay-ms', String(path.delayMs), '--jitter-ms', String(path.jitterMs), '--loss', String(path.lossPercent),
      '--rate-mbit', String(path.rateMbit), '--queue-kb', String(path.queueKb ?? 1000), '--seed', String(Date.now() % 1e9),
    ], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    forwarder.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const [ready] = (await Promise.race([once(forwarder.stdout!, 'data'), once(forwarder, 'exit').then(() => { throw new Error(`forwarder exited: ${stderr}`); })])) as [Buffer];
    if (!ready.toString().includes('ready')) throw new Error(`forwarder: ${ready.toString()}${stderr}`);
    for (const [ns, local, peer] of [[a, addressA, addressB], [b, addressB, addressA]] as const) {
      await ip('-n', ns, 'addr', 'add', local, 'peer', peer, 'dev', 'lab0');
      // A long device queue: the forwarder, not the kernel's TUN queue, decides what is dropped.
      await ip('-n', ns, 'link', 'set', 'lab0', 'up', 'txqueuelen', '10000');
    }
    const exec = (ns: string, command: string, args: string[], timeoutMs = 600_000) =>
      run('ip', ['netns', 'exec', ns, command, ...args], { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
    const fwd = forwarder;
    return {
      a, b, addressA, addressB, exec,
      spawn: (ns, command, args) => spawn('ip', ['netns', 'exec', ns, command, ...args], { stdio: ['pipe', 'pipe', 'inherit'] }),
      async setTcpCongestion(name) {
        await ip('-n', a, 'route', 'replace', addressB, 'dev', 'lab0', 'congctl', name);
        await ip('-n', b, 'route', 'replace', addressA, 'dev', 'lab0', 'congctl', name);
      },
      async counters() {
        const reports = (): number => stderr.split('\n').filter((l) => l.startsWith('b->a ')).length;
        const before = reports();
        fwd.kill('SIGUSR1');
        while (reports() === before) await once(fwd.stderr!, 'data');
        return { ab: counters(stderr, 'a->b'), ba: counters(stderr, 'b->a') };
      },
      async close() {
        const exited = once(fwd, 'exit');
        fwd.kill('SIGTERM');
        await exited;
        await teardown();
        return { ab: counters(stderr, 'a->b'), ba: counters(stderr, 'b->a') };
      },
    };
  } catch (error) {
    forwarder?.kill('SIGKILL');
    await teardown();
    throw error;
  }
}

function counters(report: string, direction: string): ForwarderCounters {
  const line = report.split('\n').findLast((l) => l.startsWith(direction)) ?? '';
  const field = (name: string): number => Number(new RegExp(`${name}=(\\d+)`).exec(line)?.[1] ?? Number.NaN);
  return { forwarded: field('forwarded'), bytes: field('bytes'), lost: field('lost'), queueDrops: field('queue_drops'), ringDrops: field('ring_drops') };
}

/** Round-trip times of `count` pings from a to b, ms. */
export async function pingRtts(lab: Lab, count: number): Promise<number[]> {
  const { stdout } = await lab.exec(lab.a, 'ping', ['-n', '-c', String(count), '-i', '0.05', '-W', '2', lab.addressB]).catch((e: { stdout?: string }) => ({ stdout: e.stdout ?? '' }));
  return [...stdout.matchAll(/time=([\d.]+) ms/g)].map((m) => Number(m[1]));
}
