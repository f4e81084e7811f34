// Copies the addon cargo built into this platform's package (the napi-rs layout: npm/<target>/), where the
// loader finds it exactly as it finds a published prebuilt package.
import { copyFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const libraries = { linux: 'libagentlink_quic.so', darwin: 'libagentlink_quic.dylib', win32: 'agentlink_quic.dll' };
const library = libraries[process.platform];
if (!library) throw new Error(`no addon name known for ${process.platform}`);
const libc = process.platform === 'linux' ? (process.report.getReport().header.glibcVersionRuntime ? '-gnu' : '-musl') : '';
const target = `${process.platform}-${process.arch}${libc}`;
const source = join(root, 'native', 'target', 'release', library);
const destination = join(root, 'npm', target, `agentlink-quic.${target}.node`);
if (!existsSync(dirname(destination))) throw new Error(`no platform package npm/${target}: add one (see docs/quic.md)`);
copyFileSync(source, destination);
console.log(`addon -> ${destination}`);
