#!/usr/bin/env bash
# The kernel-level network lab's sanity check: namespaces joined by a userspace forwarder (gcc-built) that
# delays, loses and rate-limits real TCP and UDP, so it runs as root. Installs ping (Debian package) when
# missing, builds the QUIC engine if needed. Figures come from `pnpm --filter @agentlink/benchmarks netlab`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "$(id -u)" != 0 ]]; then
  echo "the network lab needs root (network namespaces, TUN devices): run 'sudo pnpm test:netlab'" >&2
  exit 1
fi
if ! command -v ping >/dev/null 2>&1; then
  echo "installing iputils-ping (Debian package)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iputils-ping >/dev/null \
    || { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iputils-ping >/dev/null; }
fi
pnpm --silent --filter @agentlink/quic build:native
SUITE=netlab exec pnpm exec vitest run --config vitest.suite.config.ts "$@"
