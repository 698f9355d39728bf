#!/usr/bin/env bash
# Installs what is missing, builds BUILD_DIR (warnings are errors) and runs the tests.
#   (default)  every suite but `megatron` and `slow`: the unit, CLI, Python and MPI tests
#   --judges   also the `megatron` suite, Megatron-LM's own code judging the binary (its
#              Python environment comes from tools/megatron-env.sh; .ci/run runs this)
#   --all      every suite, the `slow` one too (long fuzzing, the 300 random launch lines,
#              the builds of the `rebuild` suite)
# Usage: tools/test.sh [--judges | --all] [BUILD_DIR [MESON_SETUP_ARGS...]]
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
skip=(--no-suite slow --no-suite megatron)
case "${1:-}" in
  --judges) skip=(--no-suite slow); shift ;;
  --all) skip=(); shift ;;
  -*) echo "usage: tools/test.sh [--judges | --all] [BUILD_DIR [MESON_SETUP_ARGS...]]" >&2
      exit 2 ;;
esac
dir=${1:-build}
shift || true
paramlayout_install "${PARAMLAYOUT_TEST_PACKAGES[@]}"
paramlayout_configure "$dir" --werror "$@"
paramlayout_step "building $dir/"
meson compile -C "$dir"
paramlayout_step "testing"
meson test -C "$dir" --print-errorlogs "${skip[@]}"
