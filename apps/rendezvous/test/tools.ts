import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';

/**
 * A Debian tool a test needs (.ci/run installs it). Fails with the package to install rather than with a
 * confusing spawn error when it is missing.
 */
export function requireTool(command: string, debianPackage: string): void {
  const found = spawnSync('sh', ['-c', `command -v ${command}`], { encoding: 'utf8' });
  if (found.status !== 0) {
    throw new Error(`${command} is not installed: install the Debian package "${debianPackage}" (apt-get install ${debianPackage}; .ci/run does it)`);
  }
}

/** Runs a command to its end, feeding `input` on stdin; resolves with its exit code and output. */
export async function run(command: string, args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdin.end(input ?? '');
  const [code] = (await once(child, 'close')) as [number];
  return { code, stdout, stderr };
}
