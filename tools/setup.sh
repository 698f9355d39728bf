#!/usr/bin/env bash
# Sourced by tools/demo.sh and tools/test.sh: installs the Debian packages paramlayout needs
# (when run as root), then configures build/ if it is not configured yet.
# Usage: source tools/setup.sh [BUILD_DIR [MESON_SETUP_ARGS...]]

PARAMLAYOUT_PACKAGES=(
  meson ninja-build g++ pkg-config python3   # build and the CLI tests
  libcli11-dev                               # command line parsing
  libsimdjson-dev libfmt-dev                 # fast JSON reading, fast text/JSON writing
  nlohmann-json3-dev                         # locating JSON syntax errors; test oracles
  libssl-dev                                 # SHA-256 of manifests (libcrypto)
  doctest-dev libvalijson-dev                # unit tests; JSON Schema validation in tests
)

# The tests also run the torch tools (tools/paramlayout_*.py) on a real torch, and verify
# as several processes under mpirun (Open MPI).
PARAMLAYOUT_TEST_PACKAGES=(python3-torch libopenmpi-dev openmpi-bin)

paramlayout_missing_packages() {
  local missing=() p
  for p in "${PARAMLAYOUT_PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  echo "${missing[@]}"
}

# Usage: paramlayout_install [EXTRA_PACKAGES...]
paramlayout_install() {
  local missing
  missing=$(paramlayout_missing_packages "$@")
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" -eq 0 ]; then
    echo "Installing: $missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
      { echo "apt-get install failed" >&2; return 1; }
  else
    echo "paramlayout needs these Debian packages; install them with:" >&2
    echo "  sudo apt-get install -y $missing" >&2
    return 1
  fi
}

paramlayout_configure() {
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >/dev/null || { meson setup "$dir" "$@"; return 1; }
  fi
}

# The benchmarks' build: release, no tests, in build-release/.
paramlayout_release_build() {
  paramlayout_install
  paramlayout_configure build-release -Dbuildtype=release -Dtests=disabled
  meson compile -C build-release >/dev/null
}
