#!/usr/bin/env bash
# The NAT lab: NATs built with nftables in network namespaces, so it runs as root. Installs nftables (Debian
# package) when missing, builds the QUIC engine if needed, and runs the lab's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lab-prelude.sh
require_root "network namespaces and nftables" test:natlab
install_missing nft nftables
pnpm --silent --filter @agentlink/quic build:native
SUITE=natlab exec pnpm exec vitest run --config vitest.suite.config.ts "$@"
