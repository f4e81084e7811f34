#!/usr/bin/env bash
# The NAT lab: NATs built with nftables in network namespaces, so it runs as root. Installs nftables (Debian
# package) when missing, builds the QUIC engine if needed, and runs the lab's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "$(id -u)" != 0 ]]; then
  echo "the NAT lab needs root (network namespaces and nftables): run 'sudo pnpm test:natlab'" >&2
  exit 1
fi
if ! command -v nft >/dev/null 2>&1; then
  echo "installing nftables (Debian package)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nftables >/dev/null \
    || { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nftables >/dev/null; }
fi
pnpm --silent --filter @agentlink/quic build:native
SUITE=natlab exec pnpm exec vitest run --config vitest.suite.config.ts "$@"
