#!/usr/bin/env bash
# The kernel-level network lab's sanity check: namespaces joined by a userspace forwarder (gcc-built) that
# delays, loses and rate-limits real TCP and UDP, so it runs as root. Installs ping (Debian package) when
# missing, builds the QUIC engine if needed. Figures come from `pnpm --filter @agentlink/benchmarks netlab`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lab-prelude.sh
require_root "network namespaces, TUN devices" test:netlab
install_missing ping iputils-ping
pnpm --silent --filter @agentlink/quic build:native
SUITE=netlab exec pnpm exec vitest run --config vitest.suite.config.ts "$@"
