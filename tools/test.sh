#!/usr/bin/env bash
# Installs what is missing, builds BUILD_DIR (warnings are errors) and runs the whole test
# suite but the slow one, in a few minutes after the build. The `slow` suite holds the long
# tests and the `rebuild` suite, the tests that build the project again (`pip install .`,
# the GPU rehearsal): `meson test -C BUILD_DIR --suite rebuild` (.ci/run runs it) or
# `--suite slow`.
# Usage: tools/test.sh [BUILD_DIR [MESON_SETUP_ARGS...]]
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
dir=${1:-build}
shift || true
paramlayout_install "${PARAMLAYOUT_TEST_PACKAGES[@]}"
paramlayout_configure "$dir" --werror "$@"
paramlayout_step "building $dir/"
meson compile -C "$dir"
paramlayout_step "testing"
meson test -C "$dir" --print-errorlogs --no-suite slow
