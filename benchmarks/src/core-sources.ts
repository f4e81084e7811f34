import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * Where core's TypeScript sources are loaded from by the per-path benchmarks (`read-path`, `serve-path`): this
 * checkout's by default, or a copy of packages/core/src from another commit (`--core DIR`), for A/B runs in turn.
 * The copy must sit inside the workspace (a copy under /tmp measured 750 ns against 550 for identical code).
 */
export const DEFAULT_CORE_SOURCES = new URL('../../packages/core/src', import.meta.url).pathname;

/** The URL of `file` (e.g. 'wire/codec.ts') among the core sources in `dir`, for a dynamic import. */
export function coreSourceUrl(dir: string, file: string): string {
  return pathToFileURL(resolve(dir, file)).href;
}
