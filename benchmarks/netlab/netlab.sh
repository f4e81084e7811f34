#!/usr/bin/env bash
# The kernel-level network lab (root): network namespaces joined by a userspace forwarder (forwarder.c, built
# with gcc) that delays, loses and rate-limits real kernel TCP and UDP. Installs iperf3 and ping (Debian
# packages) when missing. Arguments go to run.ts (see its header), e.g. --repeats 3 --paths 40/1,40/1/cubic.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ "$(id -u)" != 0 ]]; then
  echo "the network lab needs root (network namespaces, TUN devices): run it with sudo" >&2
  exit 1
fi
missing=()
command -v iperf3 >/dev/null 2>&1 || missing+=(iperf3)
command -v ping >/dev/null 2>&1 || missing+=(iputils-ping)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
if ((${#missing[@]})); then
  echo "installing ${missing[*]} (Debian packages)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null \
    || { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
fi
pnpm --silent --filter @agentlink/quic build:native
exec node --conditions=source --import tsx benchmarks/netlab/run.ts "$@"
