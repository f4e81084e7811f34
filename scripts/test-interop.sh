#!/usr/bin/env bash
# Tests against foreign clients and tools: curl with HTTP/2 (and a throwaway openssl certificate) against an agent, coturn's turnutils_stunclient
# against the rendezvous' STUN ports, promtool against its /metrics. Installs the Debian packages when missing
# (that part needs root; with the tools already installed any user can run it).
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
for tool in curl:curl openssl:openssl turnutils_stunclient:coturn promtool:prometheus; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ "$(id -u)" != 0 ]]; then
    echo "missing Debian packages: ${missing[*]} (install them, or run as root to have them installed)" >&2
    exit 1
  fi
  echo "installing ${missing[*]} (Debian packages)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null \
    || { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
fi
pnpm --silent --filter @agentlink/quic build:native
SUITE=interop exec pnpm exec vitest run --config vitest.suite.config.ts "$@"
