// Copies the addon cargo built for this machine to the package root as agentlink-quic.<target>.node, the "local
// build" the loader tries before the platform package (src/engine-loader.ts). It is not in the published
// tarball; the platform packages (npm/<target>/) get their engines from scripts/build-engines.sh (glibc 2.17
// for gnu), never from this host build, which needs the host's glibc.
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const libraries = { linux: 'libagentlink_quic.so', darwin: 'libagentlink_quic.dylib', win32: 'agentlink_quic.dll' };
const library = libraries[process.platform];
if (!library) throw new Error(`no addon name known for ${process.platform}`);
const libc = process.platform === 'linux' ? (process.report.getReport().header.glibcVersionRuntime ? '-gnu' : '-musl') : '';
const target = `${process.platform}-${process.arch}${libc}${process.platform === 'win32' ? '-msvc' : ''}`;
const destination = join(root, `agentlink-quic.${target}.node`);
copyFileSync(join(root, 'native', 'target', 'release', library), destination);
console.log(`addon -> ${destination}`);
