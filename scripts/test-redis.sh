#!/usr/bin/env bash
# The rendezvous against a real Redis: its store's conformance tests and clusters of instances sharing one server.
# Installs Debian's redis-server when missing (that part needs root); the tests start their own server on a free
# loopback port, without persistence, and stop it.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v redis-server >/dev/null 2>&1; then
  if [[ "$(id -u)" != 0 ]]; then
    echo "missing Debian package: redis-server (install it, or run as root to have it installed)" >&2
    exit 1
  fi
  echo "installing redis-server (Debian package)"
  install() { DEBIAN_FRONTEND=noninteractive apt-get install -o DPkg::Lock::Timeout=300 -y --no-install-recommends redis-server >/dev/null; }
  install || { apt-get update >/dev/null && install; }
  # The package starts a server on 6379 where an init system runs; the tests use their own.
fi
pnpm --silent --filter @agentlink/quic build:native
SUITE=redis exec pnpm exec vitest run --config vitest.suite.config.ts "$@"
