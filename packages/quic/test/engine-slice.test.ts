import { readdirSync, readFileSync } from 'node:fs';
import { release } from 'node:os';
import { createAgent } from '@agentlink/core';
import { expect, it } from 'vitest';
import { loadNative, quic } from '../src/index.js';

/** The scheduling slice Linux gives a thread of this process, in ns (`se.slice` in its sched file). */
function slice(task: string): number {
  const line = readFileSync(`/proc/self/task/${task}/sched`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('se.slice'));
  return Number(line?.split(':')[1]?.trim());
}

/** Custom slices for normal tasks came with Linux 6.12; earlier kernels accept one and keep their default. */
function kernelHasCustomSlices(): boolean {
  const [major = 0, minor = 0] = release().split('.').map(Number);
  return major > 6 || (major === 6 && minor >= 12);
}

function acceptedSlice(): number {
  const native = loadNative();
  if (!native.ok) throw new Error(native.reason);
  return native.binding.engineThreadSliceNs();
}

// A woken engine thread (a datagram to take, bytes to send) ran only once the task on its core finished its slice,
// ~1.5 ms on 2 cores: the whole of a token burst (docs/quic.md, "A burst's first token between two processes").
// The engine's threads ask Linux for its shortest slice, 0.1 ms, so they run within it; Node's own threads keep
// theirs. Elsewhere the engine asks for nothing and says so.
it("the engine's threads run with a 0.1 ms scheduling slice on Linux; the event loop's thread keeps the kernel's", async () => {
  const agent = await createAgent({ channels: [quic({ port: 0 })] }); // the engine's runtime is up
  try {
    if (process.platform !== 'linux') {
      expect(acceptedSlice()).toBe(0);
      return;
    }
    const engine = readdirSync('/proc/self/task').filter((task) => readFileSync(`/proc/self/task/${task}/comm`, 'utf8').trim() === 'agentlink-quic');
    expect(engine.length).toBeGreaterThan(0);
    const main = slice(String(process.pid));
    // A kernel that refuses the request (a seccomp filter without sched_setattr) leaves the threads as they were,
    // and the engine says it got nothing: nothing else may differ then.
    const accepted = acceptedSlice();
    expect([0, 100_000]).toContain(accepted);
    const expected = accepted === 100_000 && kernelHasCustomSlices() ? 100_000 : main;
    for (const task of engine) expect(slice(task)).toBe(expected);
    if (accepted === 100_000 && kernelHasCustomSlices()) expect(main).toBeGreaterThan(100_000);
  } finally {
    await agent.close();
  }
});
