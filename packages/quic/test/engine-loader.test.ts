import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { AgentError } from '@agentlink/core';
import { describe, expect, it } from 'vitest';
import { chooseEngine, engineSources, missingEngineMessage, type EngineIo } from '../src/engine-loader.js';
import { detectLibc, ENGINE_TARGETS, targetName } from '../src/engine-target.js';
import { quic, type QuicOptions } from '../src/index.js';

/** A file system and `require` where only `present` exist, and each load is recorded. */
function fakeIo(present: Record<string, string>): EngineIo<string> & { loads: string[] } {
  const loads: string[] = [];
  return {
    loads,
    exists: (path) => path in present,
    load: (specifier) => {
      loads.push(specifier);
      const binding = present[specifier];
      if (binding === undefined) throw new Error(`Cannot find module '${specifier}'\nRequire stack: …`);
      return binding;
    },
    resolve: (specifier) => `/resolved/${specifier}`,
  };
}

describe('engine target of a process', () => {
  it('names every supported platform as napi-rs does', () => {
    const facts = [
      { platform: 'linux', arch: 'x64', libc: 'glibc' as const },
      { platform: 'linux', arch: 'arm64', libc: 'glibc' as const },
      { platform: 'linux', arch: 'x64', libc: 'musl' as const },
      { platform: 'linux', arch: 'arm64', libc: 'musl' as const },
      { platform: 'darwin', arch: 'x64' },
      { platform: 'darwin', arch: 'arm64' },
      { platform: 'win32', arch: 'x64' },
    ];
    expect(facts.map(targetName)).toEqual([...ENGINE_TARGETS]);
    expect(targetName({ platform: 'freebsd', arch: 'x64' })).toBe('freebsd-x64');
    expect(targetName({ platform: 'win32', arch: 'arm64' })).toBe('win32-arm64-msvc');
  });

  it('tells musl from glibc by the report, and by the musl loader file when there is no report', () => {
    const noMuslLoader = (): boolean => false;
    expect(detectLibc({ glibcVersionRuntime: '2.36' }, () => true)).toBe('glibc');
    expect(detectLibc({}, noMuslLoader)).toBe('musl');
    expect(detectLibc(undefined, () => true)).toBe('musl');
    expect(detectLibc(undefined, noMuslLoader)).toBe('glibc');
  });
});

describe('engine choice', () => {
  const root = '/app/node_modules/@agentlink/quic';
  const local = join(root, 'agentlink-quic.linux-arm64-musl.node');

  it('prefers the local build over the platform package', () => {
    const io = fakeIo({ [local]: 'local build', '@agentlink/quic-linux-arm64-musl': 'package' });
    const choice = chooseEngine(engineSources('linux-arm64-musl', undefined, root), io);
    expect(choice).toEqual({ ok: true, binding: 'local build', from: `/resolved/${local}` });
    expect(io.loads).toEqual([local]);
  });

  it('falls back to the platform package when there is no local build, without counting that as a failure', () => {
    const io = fakeIo({ '@agentlink/quic-linux-arm64-musl': 'package' });
    const choice = chooseEngine(engineSources('linux-arm64-musl', undefined, root), io);
    expect(choice).toEqual({ ok: true, binding: 'package', from: '/resolved/@agentlink/quic-linux-arm64-musl' });
    expect(io.loads).toEqual(['@agentlink/quic-linux-arm64-musl']);
  });

  it('tries the platform package when a local file exists but does not load', () => {
    const io = fakeIo({ '@agentlink/quic-darwin-arm64': 'package' });
    const present = { ...io, exists: () => true };
    const choice = chooseEngine(engineSources('darwin-arm64', undefined, root), present);
    expect(choice.ok && choice.binding).toBe('package');
    expect(io.loads).toEqual([join(root, 'agentlink-quic.darwin-arm64.node'), '@agentlink/quic-darwin-arm64']);
  });

  it('loads only the override when one is set, even where a local build and a package exist', () => {
    const io = fakeIo({ [local]: 'local build', '@agentlink/quic-linux-arm64-musl': 'package' });
    const missing = chooseEngine(engineSources('linux-arm64-musl', '/opt/engine.node', root), io);
    expect(missing).toEqual({ ok: false, failures: ["/opt/engine.node: Cannot find module '/opt/engine.node'"] });
    expect(io.loads).toEqual(['/opt/engine.node']);
    const present = chooseEngine(engineSources('linux-arm64-musl', '/opt/engine.node', root), fakeIo({ '/opt/engine.node': 'override' }));
    expect(present.ok && present.binding).toBe('override');
  });

  it('asks for no package on a platform without one', () => {
    expect(engineSources('linux-riscv64-gnu', undefined, root)).toEqual([{ kind: 'local', specifier: join(root, 'agentlink-quic.linux-riscv64-gnu.node') }]);
    expect(chooseEngine(engineSources('linux-riscv64-gnu', undefined, root), fakeIo({}))).toEqual({ ok: false, failures: [] });
  });

  it('says which platform, which targets exist and which variable overrides', () => {
    const supported = missingEngineMessage('linux-arm64-musl', ["@agentlink/quic-linux-arm64-musl: Cannot find module '@agentlink/quic-linux-arm64-musl'"]);
    expect(supported).toContain('no QUIC engine for linux-arm64-musl');
    expect(supported).toContain("Cannot find module '@agentlink/quic-linux-arm64-musl'");
    expect(supported).toContain(ENGINE_TARGETS.join(', '));
    expect(supported).toContain('npm installs @agentlink/quic-linux-arm64-musl');
    expect(supported).toContain('AGENTLINK_QUIC_NATIVE=');
    const unsupported = missingEngineMessage('freebsd-x64', []);
    expect(unsupported).toContain('freebsd-x64 has no prebuilt engine');
    expect(unsupported).toContain('AGENTLINK_QUIC_NATIVE=');
  });
});

describe('quic({ required })', () => {
  it('refuses a required that is not a boolean', () => {
    const error = (() => {
      try {
        quic({ required: 'yes' as unknown as boolean });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(AgentError);
    expect((error as AgentError).code).toBe('INVALID_ARGUMENT');
  });

  it('checks each number when made, not at bind: the engine takes u32s, the connect timeout is a node timer', () => {
    const invalid: Array<[keyof QuicOptions, number]> = [
      ['idleTimeoutMs', 0],
      ['connectTimeoutMs', 2 ** 31],
      ['streamWindow', 2 ** 32],
      ['connectionWindow', Number.NaN],
      ['maxStreams', 1.5],
    ];
    for (const [name, value] of invalid) {
      expect(() => quic({ [name]: value })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining(name) }));
    }
    expect(() => quic({ idleTimeoutMs: 100, streamWindow: 2 ** 32 - 1, maxStreams: 1 })).not.toThrow();
  });

  it('without an engine, a required QUIC fails the agent with UNAVAILABLE and no warning; an optional one only warns', async () => {
    const script = fileURLToPath(new URL('./fixtures/quic-required.ts', import.meta.url));
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--conditions=source', '--import', 'tsx', script], {
      env: { ...process.env, AGENTLINK_QUIC_NATIVE: '/nonexistent/agentlink-quic.node' },
      timeout: 60_000,
    });
    const result = JSON.parse(stdout) as { required: string; dialOnly: string; optionalAddresses: number };
    expect(result.required).toMatch(/^UNAVAILABLE: QUIC is required but off: no QUIC engine for \w+-\w+/);
    expect(result.required).toContain(ENGINE_TARGETS.join(', '));
    expect(result.required).toContain('AGENTLINK_QUIC_NATIVE=');
    expect(result.dialOnly).toBe('UNAVAILABLE');
    expect(result.optionalAddresses).toBe(0);
    expect(stderr.match(/QUIC is off/g)).toHaveLength(1);
  });
});
