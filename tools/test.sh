#!/usr/bin/env bash
# Installs what is missing, builds build/ (warnings are errors) and runs the whole test suite.
# Usage: tools/test.sh [BUILD_DIR [MESON_SETUP_ARGS...]]
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
dir=${1:-build}
shift || true
paramlayout_install "${PARAMLAYOUT_TEST_PACKAGES[@]}"
paramlayout_configure "$dir" --werror "$@"
meson compile -C "$dir"
# The `slow` suite (verify-large: 120 G elements on the CPU) runs with `meson test --suite slow`.
meson test -C "$dir" --print-errorlogs --no-suite slow
