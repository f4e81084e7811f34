#!/usr/bin/env bash
# Packs every package (`pnpm pack`, scripts/pack.mjs) and installs the rendezvous and an agent's packages with plain
# npm into a fresh app directory, as a user would; copies the fleet scripts there. Usage (after `pnpm build`):
#   bash benchmarks/fleet/setup.sh [/tmp/fleet-app]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
app="${1:-/tmp/fleet-app}"
# The host's engine, as scripts/build-engines.sh places it (git-ignored), so that its platform package is packed too:
# agents install @agentlink/quic with its prebuilt engine and no compiler, as users do.
node_file="$(ls "$root"/packages/quic/agentlink-quic.*.node | head -1)"
target="$(basename "$node_file" .node)"; target="${target#agentlink-quic.}"
cp "$node_file" "$root/packages/quic/npm/$target/"
node "$root/scripts/pack.mjs"
rm -rf "$app" && mkdir -p "$app"
cd "$app"
npm init -y >/dev/null
npm pkg set type=module
tarballs=("$root"/.release/tarballs/*.tgz)
want=()
for t in "${tarballs[@]}"; do
  case "$(basename "$t")" in
    agentlink-core-*|agentlink-ws-*|agentlink-quic-*|agentlink-nat-*|agentlink-rendezvous-*) want+=("$t") ;;
  esac
done
npm install --no-audit --no-fund "${want[@]}"
cp "$root"/benchmarks/fleet/*.mjs "$app/"
echo "ready: cd $app && node fleet.mjs scale"
