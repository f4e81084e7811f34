#!/usr/bin/env bash
# Scores the rendezvous' systemd unit with `systemd-analyze security` (offline: no running systemd needed) and
# fails above 2.0. Installs systemd's analyzer when missing (Debian; needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
unit=apps/rendezvous/deploy/agentlink-rendezvous.service
limit=2.0
if ! command -v systemd-analyze >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null
fi
report="$(systemd-analyze security --offline=true --no-pager "$unit" 2>&1)" || true
score="$(printf '%s\n' "$report" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')"
if [[ -z "$score" ]]; then
  printf '%s\n' "$report" >&2
  echo "systemd unit: no exposure score in systemd-analyze's output" >&2
  exit 1
fi
if awk -v s="$score" -v l="$limit" 'BEGIN { exit !(s > l) }'; then
  printf '%s\n' "$report" | grep -v '✓' >&2
  echo "systemd unit: exposure $score > $limit" >&2
  exit 1
fi
echo "systemd unit: exposure $score (<= $limit)"
