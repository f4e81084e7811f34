import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** Runs one of this package's scripts in a fresh Node process, from TypeScript source. */
export function spawnScript(script: 'peer-process' | 'clean-exit-process', argument: unknown): ChildProcess {
  const path = fileURLToPath(new URL(`./${script}.ts`, import.meta.url));
  return spawn(process.execPath, ['--conditions=source', '--import', 'tsx', path, JSON.stringify(argument)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
}

/** Resolves with the first stdout line of `child` (rejects if it exits first or stays silent). */
export function firstLine(child: ChildProcess, timeoutMs = 20_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const timer = setTimeout(() => reject(new Error('child printed nothing in time')), timeoutMs);
    child.stdout?.on('data', (data: Buffer) => {
      buffered += data.toString('utf8');
      const newline = buffered.indexOf('\n');
      if (newline >= 0) {
        clearTimeout(timer);
        resolve(buffered.slice(0, newline));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`child exited with ${code} before printing`));
    });
  });
}

/** Starts a conformance peer process and returns its address. */
export async function startPeerProcess(spec: unknown): Promise<{ child: ChildProcess; address: string }> {
  const child = spawnScript('peer-process', spec);
  const line = await firstLine(child);
  return { child, address: (JSON.parse(line) as { address: string }).address };
}
