#!/usr/bin/env bash
# Cross-builds the QUIC engine for the given napi-rs targets (default: the four Linux ones) and puts each into
# its platform package, packages/quic/npm/<target>/agentlink-quic.<target>.node (gitignored).
#   scripts/build-engines.sh [linux-x64-gnu linux-arm64-gnu linux-x64-musl linux-arm64-musl darwin-x64 darwin-arm64]
# How: `napi build -x` (@napi-rs/cli) through cargo-zigbuild, with zig as the C compiler and linker; the gnu
# targets are built against glibc 2.17 (the `.2.17` suffix), so they load on any glibc >= 2.17 (CentOS 7, Debian
# 8 and later); musl builds link libc dynamically (-crt-static, which napi build sets), as Node on musl needs.
# zig and cargo-zigbuild come from PyPI (ziglang, cargo-zigbuild: prebuilt wheels, no compile), installed into a
# venv under $AGENTLINK_TOOLS (default ~/.cache/agentlink-tools) when missing; rustup adds the Rust targets.
# win32-x64-msvc is not built here: napi build -x would use cargo-xwin, which downloads Microsoft's CRT and SDK
# (not reachable), and zig has no MSVC libraries; the release workflow builds it on Windows.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
quic="$root/packages/quic"

declare -A triples=(
  [linux-x64-gnu]=x86_64-unknown-linux-gnu.2.17
  [linux-arm64-gnu]=aarch64-unknown-linux-gnu.2.17
  [linux-x64-musl]=x86_64-unknown-linux-musl
  [linux-arm64-musl]=aarch64-unknown-linux-musl
  [darwin-x64]=x86_64-apple-darwin
  [darwin-arm64]=aarch64-apple-darwin
)
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(linux-x64-gnu linux-arm64-gnu linux-x64-musl linux-arm64-musl)
for target in "${targets[@]}"; do
  if [[ -z "${triples[$target]:-}" ]]; then
    echo "build-engines: no cross build for '$target' here (known: ${!triples[*]}); win32-x64-msvc builds in .github/workflows/release.yml" >&2
    exit 2
  fi
done

tools="${AGENTLINK_TOOLS:-$HOME/.cache/agentlink-tools}"
venv="$tools/zig-venv"
if ! command -v zig >/dev/null 2>&1 || ! command -v cargo-zigbuild >/dev/null 2>&1; then
  if [[ ! -x "$venv/bin/cargo-zigbuild" || ! -x "$venv/bin/zig" ]]; then
    echo "==> installing zig and cargo-zigbuild from PyPI into $venv"
    python3 -m venv "$venv" || { apt-get install -y -qq python3-venv >/dev/null && python3 -m venv "$venv"; }
    "$venv/bin/pip" install --quiet --disable-pip-version-check 'ziglang==0.17.0' 'cargo-zigbuild==0.24.0'
    # napi build -x looks for `zig` on PATH; the wheel ships it as a Python module.
    printf '#!/bin/sh\nexec "%s" -m ziglang "$@"\n' "$venv/bin/python3" >"$venv/bin/zig"
    chmod +x "$venv/bin/zig"
  fi
  export PATH="$venv/bin:$PATH"
fi

rust_targets=()
for target in "${targets[@]}"; do rust_targets+=("${triples[$target]%%.*}"); done
rustup target add "${rust_targets[@]}"

out="$quic/native/target/engines"
for target in "${targets[@]}"; do
  triple="${triples[$target]}"
  echo "==> $target ($triple)"
  started=$SECONDS
  # --output-dir keeps napi's generated index.d.ts out of the package (our loader is src/native.ts). The target
  # directory is the host build's (native/target/<triple>/ per target): a host build started meanwhile waits for
  # cargo's lock, as in any cargo project. CARGO_TARGET_DIR gives cross builds a directory of their own.
  (cd "$quic" && pnpm exec napi build --platform --release --cross-compile --target "$triple" \
    --manifest-path native/Cargo.toml --output-dir "$out/$target" --no-js)
  cp "$out/$target/agentlink-quic.$target.node" "$quic/npm/$target/"
  echo "    $target built in $((SECONDS - started)) s -> packages/quic/npm/$target/agentlink-quic.$target.node"
done
