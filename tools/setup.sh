#!/usr/bin/env bash
# Sourced by tools/demo.sh, tools/test.sh and the benchmarks (bench/): installs the Debian
# packages paramlayout needs (when run as root) and configures a build directory.

PARAMLAYOUT_PACKAGES=(
  meson ninja-build g++ pkg-config python3   # build and the CLI tests
  libcli11-dev                               # command line parsing
  libsimdjson-dev libfmt-dev                 # fast JSON reading, fast text/JSON writing
  nlohmann-json3-dev                         # locating JSON syntax errors; test oracles
  libssl-dev                                 # SHA-256 of manifests (libcrypto)
  doctest-dev libvalijson-dev                # unit tests; JSON Schema validation in tests
)

# The tests also run the Python package on a real torch and install it with pip into a
# fresh virtual environment (meson-python), and run verify as several processes under
# mpirun (Open MPI).
PARAMLAYOUT_TEST_PACKAGES=(python3-torch python3-mesonpy python3-venv libopenmpi-dev openmpi-bin git)

# Usage: paramlayout_step MESSAGE: one line of progress on stderr.
paramlayout_step() {
  echo "==> $*" >&2
}

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
    paramlayout_step "installing Debian packages: $missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
      { echo "apt-get install failed" >&2; return 1; }
  else
    echo "paramlayout needs these Debian packages; install them with:" >&2
    echo "  sudo apt-get install -y $missing" >&2
    return 1
  fi
}

# What Meson may find: the packages above as installed now, and the CUDA toolkit.
paramlayout_found_dependencies() {
  dpkg-query -W -f='${Package} ${Status} ${Version}\n' \
    "${PARAMLAYOUT_PACKAGES[@]}" "${PARAMLAYOUT_TEST_PACKAGES[@]}" 2>/dev/null
  ls -d /usr/local/cuda/bin/nvcc /usr/local/cuda/lib64/libnccl.so* 2>/dev/null
  true
}

# Usage: paramlayout_configure BUILD_DIR [MESON_SETUP_ARGS...]
# Configures BUILD_DIR if it is not configured yet, and configures it again when the
# packages Meson looks for changed since (Open MPI installed after a first build, say), so
# that the features and tests they enable are not left out.
paramlayout_configure() {
  local dir=$1; shift
  local found
  found=$(paramlayout_found_dependencies)
  if [ ! -f "$dir/build.ninja" ]; then
    paramlayout_step "configuring $dir/ (meson setup)"
    meson setup "$dir" "$@" >/dev/null || { meson setup "$dir" "$@"; return 1; }
  elif [ "$found" != "$(cat "$dir/paramlayout-dependencies.txt" 2>/dev/null)" ]; then
    paramlayout_step "configuring $dir/ again: the installed packages changed"
    meson setup --reconfigure "$dir" "$@" >/dev/null ||
      { meson setup --reconfigure "$dir" "$@"; return 1; }
  fi
  echo "$found" >"$dir/paramlayout-dependencies.txt"
}

# The benchmarks' build: release, no tests, in build-release/.
paramlayout_release_build() {
  paramlayout_install
  paramlayout_configure build-release -Dbuildtype=release -Dtests=disabled
  paramlayout_step "building build-release/"
  meson compile -C build-release >build-release/compile.log 2>&1 ||
    { tail -n 40 build-release/compile.log >&2; echo "the release build failed" >&2; return 1; }
}
