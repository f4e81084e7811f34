# Sourced by the root-only lab scripts (test-natlab.sh, test-netlab.sh): what both need before their tests.

# require_root <what it needs root for> <the pnpm script to run with sudo>
require_root() {
  if [[ "$(id -u)" != 0 ]]; then
    echo "this lab needs root ($1): run 'sudo pnpm $2'" >&2
    exit 1
  fi
}

# install_missing <command> <Debian package>: installs the package when the command is missing (fresh CI machine).
install_missing() {
  command -v "$1" >/dev/null 2>&1 && return 0
  echo "installing $2 (Debian package)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$2" >/dev/null \
    || { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$2" >/dev/null; }
}
