import { execFileSync } from 'node:child_process';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { createAgent, type Agent } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import { within } from './assertions.js';
import { startPeerProcess } from './child-process.js';
import { loadFactory, type ConformanceTarget } from './target.js';

const BURST = 200;

/**
 * Time to first token without a clock: the peer's producer writes a burst in one turn and then blocks its
 * thread until the caller says it has the first item. A channel that holds a stream's first frame for batching
 * (until the end of the producer's turn) never delivers it, and the case fails at its bound; one that sends it
 * at once delivers it while the producer is blocked. Registered by `runConformanceSuite`.
 */
export function describeFirstTokenCases(target: ConformanceTarget): void {
  describe('first token', () => {
    const cleanups: Array<() => Promise<void>> = [];

    afterEach(async () => {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    });

    it("a burst's first item reaches the caller while the producer, its burst written in one turn, blocks its thread", async () => {
      const dir = await mkdtemp(join(tmpdir(), 'agentlink-first-token-'));
      cleanups.push(() => rm(dir, { recursive: true, force: true }));
      const release = join(dir, 'release');
      execFileSync('mkfifo', [release]);
      const { child, address } = await startPeerProcess({ module: target.module, factory: target.factory, listenOptions: target.listenOptions });
      cleanups.push(() => killed(child));
      const factory = await loadFactory(target);
      const client: Agent = await createAgent({ channels: [factory(target.dialOptions ?? {})] });
      cleanups.push(() => client.close());

      const iterator = client.stream<string>(address, 'burst-then-block', { count: BURST, release })[Symbol.asyncIterator]();
      // The bound only turns a hang (the first item held behind a producer that never yields) into a failure.
      const first = await within(iterator.next(), 15_000, 'the first item while the producer blocks');
      expect(first.value).toBe('token-0');
      const writer = await open(release, 'w'); // the producer is waiting for this, with token-0 delivered
      await writer.write(Buffer.from([1]));
      await writer.close();
      const rest: string[] = [];
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) rest.push(next.value);
      expect(rest).toEqual([...Array.from({ length: BURST - 1 }, (_, i) => `token-${i + 1}`), 'released']);
    });
  });
}

async function killed(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}
