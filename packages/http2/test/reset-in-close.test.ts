import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

/** Resident memory of a live process (Linux /proc), 0 once it is gone. */
function residentBytes(pid: number): number {
  try {
    const line = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return line ? Number(line[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Far above what the fixture needs (~100 MiB): only the spinning regression gets there (it adds ~140 MB/s). */
const RUNAWAY_BYTES = 768 * 1024 * 1024;

it('a reset issued while node delivers another stream’s reset goes out, and the session carries calls after it', async () => {
  // In a process of its own: on Node 20 an immediate reset there spins forever inside nghttp2 (src/stream-reset.ts),
  // so the child is killed once its memory runs away, instead of taking the test runner with it.
  const script = fileURLToPath(new URL('./fixtures/reset-in-close.ts', import.meta.url));
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  child.stdout.on('data', (data: Buffer) => (output += data.toString('utf8')));
  let ranAway = false;
  const watchdog = setInterval(() => {
    if (residentBytes(child.pid!) > RUNAWAY_BYTES) {
      ranAway = true;
      child.kill('SIGKILL');
    }
  }, 200);
  const exitCode = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  clearInterval(watchdog);
  expect(ranAway, 'the process spun in node:http2 with its memory growing').toBe(false);
  expect(exitCode).toBe(0);
  // The server's reset reached the caller, the caller's reset reached the server's handler (as a cancellation), and
  // a later call on the same session was answered (a whole response frame: 4-byte header + msgpack).
  const result = JSON.parse(output.trim()) as Record<string, unknown>;
  expect(result).toEqual({ doomedFate: 'PROTOCOL_ERROR', bystanderFate: 'CANCELLED', handlerSaw: 'CANCELLED', afterBytes: expect.any(Number) });
  expect(result['afterBytes']).toBeGreaterThan(4);
}, 60_000);
