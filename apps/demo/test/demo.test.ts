import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { fakeLlm, type Token } from '../src/fake-llm.js';

async function collect(prompt: string): Promise<string[]> {
  const out: string[] = [];
  for await (const token of fakeLlm({ prompt }, new AbortController().signal, { firstTokenMs: 0, perTokenMs: 0 })) out.push(token.text);
  return out;
}

describe('demo', () => {
  it('the fake LLM is deterministic per prompt', async () => {
    expect(await collect('same')).toEqual(await collect('same'));
    expect(await collect('one')).not.toEqual(await collect('other'));
  });

  it('streams the whole answer between two agent processes and reports TTFT and tokens/s', async () => {
    const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, ['--conditions=source', '--import', 'tsx', main, 'test prompt'], {
      timeout: 30_000,
    });
    const expected: Token[] = [];
    for await (const t of fakeLlm({ prompt: 'test prompt' }, new AbortController().signal, { firstTokenMs: 0, perTokenMs: 0 })) expected.push(t);
    expect(stdout).toContain(expected.map((t) => t.text).join(''));
    expect(stdout).toMatch(/time to first token:\s+\d+\.\d ms/);
    expect(stdout).toContain(`tokens:               ${expected.length} in`);
    expect(stdout).toMatch(/tokens\/s:\s+\d+\.\d/);
  });
});
