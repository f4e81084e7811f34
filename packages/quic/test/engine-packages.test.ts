import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { ENGINE_TARGETS } from '../src/engine-target.js';

const packageRoot = fileURLToPath(new URL('..', import.meta.url));
const script = join(packageRoot, 'scripts', 'sync-engine-packages.mjs');
const run = (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
  promisify(execFile)(process.execPath, [script, ...args]).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
  );

/** A copy of the package's manifests (package.json and npm/), which the script can check and rewrite. */
async function copyOfPackage(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'agentlink-engine-packages-'));
  await cp(join(packageRoot, 'package.json'), join(dir, 'package.json'));
  await cp(join(packageRoot, 'npm'), join(dir, 'npm'), { recursive: true, filter: (source) => !source.endsWith('.node') });
  return dir;
}

const readJson = async (path: string): Promise<Record<string, unknown>> => JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>;

describe('platform engine packages', () => {
  const copies: string[] = [];
  afterEach(async () => {
    await Promise.all(copies.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
  });

  it('are in step with @agentlink/quic: one per supported target, same version, all optional dependencies', async () => {
    const result = await run('--check');
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const main = await readJson(join(packageRoot, 'package.json'));
    expect(Object.keys(main.optionalDependencies as object).sort()).toEqual(ENGINE_TARGETS.map((t) => `@agentlink/quic-${t}`).sort());
    for (const target of ENGINE_TARGETS) {
      const manifest = await readJson(join(packageRoot, 'npm', target, 'package.json'));
      expect(manifest.version).toBe(main.version);
      expect(manifest.main).toBe(`agentlink-quic.${target}.node`);
    }
    const musl = await readJson(join(packageRoot, 'npm', 'linux-arm64-musl', 'package.json'));
    expect([musl.os, musl.cpu, musl.libc]).toEqual([['linux'], ['arm64'], ['musl']]);
    const windows = await readJson(join(packageRoot, 'npm', 'win32-x64-msvc', 'package.json'));
    expect([windows.os, windows.cpu, windows.libc]).toEqual([['win32'], ['x64'], undefined]);
  });

  it('fail the check when a version drifts, and are put back in step by the sync', async () => {
    const dir = await copyOfPackage();
    copies.push(dir);
    const main = await readJson(join(dir, 'package.json'));
    await writeFile(join(dir, 'package.json'), `${JSON.stringify({ ...main, version: '9.9.9' }, null, 2)}\n`);
    const drifted = await run('--check', '--root', dir);
    expect(drifted.code).toBe(1);
    expect(drifted.stderr).toContain(`npm/darwin-arm64/package.json version: ${JSON.stringify(main.version)}, expected "9.9.9"`);
    expect(drifted.stderr).toContain('@agentlink/quic optionalDependencies');

    const synced = await run('--root', dir);
    expect(synced.code).toBe(0);
    expect((await readJson(join(dir, 'npm', 'darwin-arm64', 'package.json'))).version).toBe('9.9.9');
    expect((await readJson(join(dir, 'package.json'))).optionalDependencies).toMatchObject({ '@agentlink/quic-darwin-arm64': 'workspace:9.9.9' });
    expect((await run('--check', '--root', dir)).code).toBe(0);
  });
});
