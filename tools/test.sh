#!/usr/bin/env bash
# Installs what is missing, builds build/ (warnings are errors) and runs the whole test suite.
# Usage: tools/test.sh [BUILD_DIR [MESON_SETUP_ARGS...]]
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
dir=${1:-build}
shift || true
paramlayout_install
paramlayout_configure "$dir" --werror "$@"
meson compile -C "$dir"
meson test -C "$dir" --print-errorlogs
