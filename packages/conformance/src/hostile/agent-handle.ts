import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { AgentOptions } from '@agentlink/core';
import type { ConformanceTarget } from '../target.js';

/** What the agent process reports about itself (see agent-process.ts). */
export interface AgentProcessStats {
  rss: number;
  peakRss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  channels: number;
  activeStreams: number;
  /** Channels holding streams, as "peer@address: count". */
  streamsByChannel: string[];
  refusals: Record<string, number>;
  produced: number;
  slowReader: { streams: number; firstItems: number };
  prototypeClean: boolean;
}

/** The parent's side of an agent process: start it, ask it things, wait for conditions on its stats, stop it. */
export class AgentProcess {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  private exited: Error | undefined;

  private constructor(
    private readonly child: ChildProcess,
    readonly address: string,
  ) {
    child.once('exit', (code, signal) => {
      this.exited = new Error(`the agent process exited (${code ?? signal})`);
      for (const { reject } of this.pending.values()) reject(this.exited);
      this.pending.clear();
    });
  }

  static async start(target: ConformanceTarget, agentOptions: Partial<AgentOptions>): Promise<AgentProcess> {
    const script = fileURLToPath(new URL('./agent-process.ts', import.meta.url));
    const spec = { module: target.module, factory: target.factory, listenOptions: target.listenOptions, dialOptions: target.dialOptions, agentOptions };
    const child = spawn(process.execPath, ['--expose-gc', '--conditions=source', '--import', 'tsx', script, JSON.stringify(spec)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const lines = createInterface({ input: child.stdout! });
    const first = await new Promise<string>((resolve, reject) => {
      // Generous: starting node + tsx took over 20 s on a loaded 2-core machine (two CPU burners beside the run);
      // this only has to catch a process that hangs, within the test's 120 s.
      const timer = setTimeout(() => reject(new Error('the agent process printed nothing within 90 s')), 90_000);
      lines.once('line', (line) => {
        clearTimeout(timer);
        resolve(line);
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`the agent process exited with ${code} before it was ready`));
      });
    });
    const handle = new AgentProcess(child, (JSON.parse(first) as { address: string }).address);
    lines.on('line', (line) => handle.answer(line));
    return handle;
  }

  request<T = unknown>(op: string, args: Record<string, unknown> = {}): Promise<T> {
    if (this.exited) return Promise.reject(this.exited);
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.child.stdin!.write(`${JSON.stringify({ id, op, ...args })}\n`);
    });
  }

  stats(): Promise<AgentProcessStats> {
    return this.request('stats');
  }

  /** Collects garbage (twice) in the process, then reports: the figure "after an attack" is taken this way. */
  collectedStats(): Promise<AgentProcessStats> {
    return this.request('gc');
  }

  resetPeak(): Promise<AgentProcessStats> {
    return this.request('reset-peak');
  }

  /** Polls the process's stats until `condition` holds; throws with the last stats when it does not within `ms`. */
  async waitFor(what: string, condition: (stats: AgentProcessStats) => boolean, ms: number): Promise<AgentProcessStats> {
    const deadline = Date.now() + ms;
    for (let delay = 10; ; delay = Math.min(delay * 2, 200)) {
      const stats = await this.stats();
      if (condition(stats)) return stats;
      if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms; last stats ${JSON.stringify({ ...stats, slowReader: undefined })}`);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }

  get alive(): boolean {
    return this.exited === undefined;
  }

  async stop(): Promise<void> {
    if (this.exited) return;
    const exit = once(this.child, 'exit');
    this.child.stdin!.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await exit;
    clearTimeout(timer);
  }

  private answer(line: string): void {
    const { id, result, error } = JSON.parse(line) as { id: number; result?: unknown; error?: string };
    const waiter = this.pending.get(id);
    if (!waiter) return;
    this.pending.delete(id);
    if (error) waiter.reject(new Error(error));
    else waiter.resolve(result);
  }
}
