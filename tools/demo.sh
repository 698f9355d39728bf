#!/usr/bin/env bash
# Installs what is missing, builds build/, and plans a Llama-3-8B-shaped manifest with both
# optimizer strategies at 8 data-parallel ranks, showing each summary.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
paramlayout_install
paramlayout_configure build
meson compile -C build >/dev/null

manifest=testdata/manifests/llama3-8b.json
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for strategy in sequential-dp layerwise; do
  echo "\$ build/paramlayout plan $manifest --dp 8 --strategy $strategy -o layout-$strategy.json"
  build/paramlayout plan "$manifest" --dp 8 --strategy "$strategy" -o "$out/layout-$strategy.json"
  echo
done
echo "First params of the layerwise layout (each matrix whole inside one rank's shard):"
grep -m 4 '"name"' "$out/layout-layerwise.json"
