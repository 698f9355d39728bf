#!/usr/bin/env bash
# Puts Megatron-LM's `megatron/core` package into build-carry/megatron/ (ignored by git), for
# the GPU run's Megatron-LM step (tests/gpu/megatron_ddp.py imports it there). Megatron-LM is
# read from a checkout: a work tree or a bare git directory (its HEAD). Nothing of it is
# committed to this project.
# Usage: tools/gpu-megatron.sh [MEGATRON_LM]   (default: $MEGATRON_LM)
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-${MEGATRON_LM:-}}
[ -n "$src" ] && [ -e "$src" ] ||
  { echo "usage: tools/gpu-megatron.sh MEGATRON_LM (a Megatron-LM work tree or bare git dir)" >&2; exit 2; }
dest=build-carry/megatron
rm -rf "$dest"
mkdir -p build-carry
if [ -d "$src/megatron/core" ]; then
  cp -r "$src/megatron" "$dest.tmp"
  commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
else
  mkdir -p "$dest.tmp"
  git --git-dir="$src" archive HEAD megatron/core | tar -x -C "$dest.tmp" --strip-components=1
  commit=$(git --git-dir="$src" rev-parse HEAD)
fi
# Only megatron/core, without its caches; megatron/ has no __init__.py (a namespace package).
mkdir -p "$dest"
mv "$dest.tmp/core" "$dest/core"
rm -rf "$dest.tmp"
find "$dest" -name __pycache__ -type d -prune -exec rm -rf {} +
echo "Megatron-LM $commit (megatron/core)" >"$dest/SOURCE"
echo "gpu-megatron: $dest: Megatron-LM $commit, $(du -sh "$dest" | cut -f1)"
