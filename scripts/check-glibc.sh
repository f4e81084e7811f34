#!/usr/bin/env bash
# Fails when a Linux gnu engine needs a glibc newer than 2.17 (the floor the prebuilt packages promise: RHEL 7,
# Debian 8, Ubuntu 14.04 and later), reading the versioned symbols it imports (`objdump -T`, binutils).
#   scripts/check-glibc.sh [file.node ...]   default: packages/quic/npm/linux-*-gnu/*.node (at least one)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
max=2.17
files=("$@")
if [[ ${#files[@]} -eq 0 ]]; then
  shopt -s nullglob
  files=("$root"/packages/quic/npm/linux-*-gnu/*.node)
  [[ ${#files[@]} -gt 0 ]] || { echo "check-glibc: no engine in packages/quic/npm/linux-*-gnu/ (run scripts/build-engines.sh)" >&2; exit 1; }
fi
command -v objdump >/dev/null 2>&1 || apt-get install -y -qq binutils >/dev/null
status=0
for file in "${files[@]}"; do
  versions="$(objdump -T "$file" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV)"
  [[ -n "$versions" ]] || { echo "check-glibc: $file imports no GLIBC symbol (not a glibc build?)" >&2; status=1; continue; }
  newest="$(tail -n1 <<<"$versions")"
  if [[ "$(printf '%s\n%s\n' "$newest" "$max" | sort -V | tail -n1)" != "$max" ]]; then
    echo "check-glibc: $file needs GLIBC_$newest (> $max), from: $(objdump -T "$file" | grep -E "GLIBC_($(sed -n "/^$max\$/,\$p" <<<"$versions" | tail -n +2 | sed 's/\./\\./g' | paste -sd'|'))[^0-9.]" | awk '{print $NF}' | paste -sd' ')" >&2
    status=1
  else
    echo "check-glibc: $(basename "$file") ok, newest GLIBC_$newest (<= $max)"
  fi
done
exit $status
