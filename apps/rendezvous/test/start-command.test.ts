import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { configFrom } from '../src/config.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

describe("docs/rendezvous.md's start command", () => {
  it('starts the rendezvous from the repository root under pnpm, with flags the rendezvous accepts', async () => {
    const doc = readFileSync(`${root}docs/rendezvous.md`, 'utf8');
    const line = /^pnpm --filter @agentlink\/rendezvous start.*$/m.exec(doc)?.[0];
    expect(line, 'the start command in docs/rendezvous.md').toBeDefined();
    const words = line!.split(/\s+/);
    const command = words.slice(0, words.indexOf('start') + 1);
    const flags = words.slice(command.length).map((w) => w.replace(/^"\$PWD\//, '/tmp/').replace(/"$/, ''));
    expect(flags[0], 'pnpm 10 passes a `--` on to the script').not.toBe('--');
    expect(configFrom(flags, {})).toMatchObject({ port: 4433 });

    // The same command with ports from the OS, so the test never collides with anything.
    const child = spawn(command[0]!, [...command.slice(1), '--port', '0', '--stun-ports', '0,0', '--http-port=-1'], {
      cwd: root,
      detached: true, // its own process group: pnpm and the node under it stop together
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      const started = await new Promise<{ address: string; stunPorts: number[] }>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          for (const text of out.split('\n')) {
            if (text.startsWith('{"address"')) resolve(JSON.parse(text) as { address: string; stunPorts: number[] });
          }
        });
        child.once('exit', (code) => reject(new Error(`exited ${code} before starting: ${stderr}`)));
      });
      expect(started.address).toMatch(/^[a-z2-7]{52}@wss:\/\/0\.0\.0\.0:\d+\/agentlink$/);
      expect(started.stunPorts).toHaveLength(2);
    } finally {
      process.kill(-child.pid!, 'SIGTERM');
    }
  });
});
