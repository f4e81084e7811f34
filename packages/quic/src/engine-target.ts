/**
 * Which prebuilt engine fits a machine: the napi-rs target names (`linux-x64-gnu`, `darwin-arm64`, …) and how the
 * running process is mapped to one. Pure functions over injected facts, so the choice is testable for every
 * platform from any machine.
 */

/** Every target an engine package is published for (packages/quic/npm/<target>/, docs/quic.md). */
export const ENGINE_TARGETS = [
  'linux-x64-gnu',
  'linux-arm64-gnu',
  'linux-x64-musl',
  'linux-arm64-musl',
  'darwin-x64',
  'darwin-arm64',
  'win32-x64-msvc',
] as const;

export type EngineTarget = (typeof ENGINE_TARGETS)[number];

/** What the loader needs to know about the process; `libc` only matters on Linux. */
export interface PlatformFacts {
  platform: string;
  arch: string;
  libc?: 'glibc' | 'musl';
}

/** The napi-rs spelling of a platform (also for unsupported ones, so a message can name them). */
export function targetName(facts: PlatformFacts): string {
  if (facts.platform === 'linux') return `linux-${facts.arch}-${facts.libc === 'musl' ? 'musl' : 'gnu'}`;
  if (facts.platform === 'win32') return `win32-${facts.arch}-msvc`;
  return `${facts.platform}-${facts.arch}`;
}

export function isEngineTarget(name: string): name is EngineTarget {
  return (ENGINE_TARGETS as readonly string[]).includes(name);
}

/** Just the part of Node's diagnostic report the libc detection reads. */
export interface ReportHeader {
  glibcVersionRuntime?: string;
}

/**
 * glibc or musl, as napi-rs's generated loader decides: Node's report names the glibc it runs on, and a musl
 * build of Node has no such field. When no report can be had (a runtime without `process.report`), the dynamic
 * loader's file tells: musl installs `/lib/ld-musl-<arch>.so.1`.
 */
export function detectLibc(header: ReportHeader | undefined, muslLoaderExists: () => boolean): 'glibc' | 'musl' {
  if (header) return header.glibcVersionRuntime ? 'glibc' : 'musl';
  return muslLoaderExists() ? 'musl' : 'glibc';
}
