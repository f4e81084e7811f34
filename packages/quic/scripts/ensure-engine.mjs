// Before the tests: rebuild the local engine when cargo is here (incremental: a no-op when nothing changed), so
// the tests always run the engine of these sources. Without cargo — a user other than the one whose toolchain
// built it, say — the engine `pnpm build` left is tested as it is; without either, the tests could only fail
// later with a vaguer message, so this says what to do now.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const hasCargo = spawnSync('cargo', ['--version'], { stdio: 'ignore' }).status === 0;
if (hasCargo) {
  const built = spawnSync('pnpm', ['--silent', 'run', 'build:native'], { cwd: root, stdio: 'inherit' });
  process.exit(built.status ?? 1);
}
const engines = readdirSync(root).filter((name) => /^agentlink-quic\..+\.node$/.test(name));
if (engines.length > 0) {
  console.log(`cargo is not on PATH: testing the QUIC engine built before (${engines.join(', ')})`);
  process.exit(0);
}
console.error('no QUIC engine built and cargo is not on PATH: run `pnpm build` (README command 1) with cargo first');
process.exit(1);
