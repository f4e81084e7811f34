/**
 * Where the engine is looked for, in napi-rs's order: a file named by the override variable (alone: a wrong path
 * turns QUIC off rather than silently loading another build), else the local build next to this package (a
 * monorepo or from-source build, not in the published tarball), else the platform package npm installed as an
 * optional dependency. The file system and `require` are injected, so the choice is tested without either.
 */
import { join } from 'node:path';
import { ENGINE_TARGETS, isEngineTarget } from './engine-target.js';

/** Names a file (`/path/to/agentlink-quic.node`) that is loaded instead of any other engine. */
export const ENGINE_OVERRIDE_VARIABLE = 'AGENTLINK_QUIC_NATIVE';

export interface EngineSource {
  kind: 'override' | 'local' | 'package';
  /** A path (override, local) or a package name (package), as `require` takes it. */
  specifier: string;
}

/** The file a local build leaves in the package root (`pnpm --filter @agentlink/quic build:native`). */
export const localEngineFile = (target: string): string => `agentlink-quic.${target}.node`;

/** The sources to try, in order, for `target`; `packageRoot` is @agentlink/quic's own directory. */
export function engineSources(target: string, override: string | undefined, packageRoot: string): EngineSource[] {
  if (override) return [{ kind: 'override', specifier: override }];
  const sources: EngineSource[] = [{ kind: 'local', specifier: join(packageRoot, localEngineFile(target)) }];
  if (isEngineTarget(target)) sources.push({ kind: 'package', specifier: `@agentlink/quic-${target}` });
  return sources;
}

export interface EngineIo<T> {
  exists(path: string): boolean;
  /** `require`: throws when the file or package is missing or is not a loadable addon. */
  load(specifier: string): T;
  resolve(specifier: string): string;
}

export type EngineChoice<T> = { ok: true; binding: T; from: string } | { ok: false; failures: string[] };

/**
 * Loads the first source that loads. A local file that does not exist is not a failure (it is absent from every
 * installed package); an override or a package that does not load is, and its reason is kept for the message.
 */
export function chooseEngine<T>(sources: EngineSource[], io: EngineIo<T>): EngineChoice<T> {
  const failures: string[] = [];
  for (const source of sources) {
    if (source.kind === 'local' && !io.exists(source.specifier)) continue;
    try {
      const binding = io.load(source.specifier);
      return { ok: true, binding, from: io.resolve(source.specifier) };
    } catch (error) {
      failures.push(`${source.specifier}: ${String((error as Error)?.message ?? error).split('\n')[0]}`);
    }
  }
  return { ok: false, failures };
}

/** Why QUIC is off, and every way to turn it on: the platform, the supported targets, the override variable. */
export function missingEngineMessage(target: string, failures: string[]): string {
  const supported = ENGINE_TARGETS.join(', ');
  const tried = failures.length > 0 ? ` (${failures.join('; ')})` : '';
  const install = isEngineTarget(target)
    ? `npm installs @agentlink/quic-${target} with @agentlink/quic unless optional dependencies are omitted (npm --omit=optional)`
    : `${target} has no prebuilt engine`;
  return (
    `no QUIC engine for ${target}${tried}. Prebuilt engines: ${supported}; ${install}. ` +
    `${ENGINE_OVERRIDE_VARIABLE}=/path/to/agentlink-quic.node loads an engine built elsewhere; ` +
    `from a clone of the repository, pnpm --filter @agentlink/quic build:native builds one (needs cargo)`
  );
}
