import { spawn, type ChildProcess } from 'node:child_process';

/**
 * Runs a rendezvous entry point (TypeScript source, through tsx) in its own process, so it can be killed like a
 * real instance; resolves with the address it prints as `{"address": …}` once it listens.
 */
export async function instanceProcess(script: string, args: string[]): Promise<{ address: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const address = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      for (const line of out.split('\n')) if (line.startsWith('{"address"')) resolve((JSON.parse(line) as { address: string }).address);
    });
    child.once('exit', (code) => reject(new Error(`instance exited with ${code}`)));
  });
  return { address, child };
}
