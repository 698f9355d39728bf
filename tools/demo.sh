#!/usr/bin/env bash
# Installs what is missing, builds build/, and plans a Llama-3-8B-shaped manifest with both
# optimizer strategies at 8 data-parallel ranks, showing each summary.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
paramlayout_install
paramlayout_configure build
paramlayout_step "building the program in build/ (a few minutes the first time)"
meson compile -C build paramlayout
paramlayout_step "built; planning"
echo

manifest=testdata/manifests/llama3-8b.json
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for strategy in sequential-dp layerwise; do
  echo "\$ build/paramlayout plan $manifest --dp 8 --strategy $strategy -o layout-$strategy.json"
  build/paramlayout plan "$manifest" --dp 8 --strategy "$strategy" -o "$out/layout-$strategy.json"
  echo
done
echo "The first params of the layerwise (Muon) buffer: each matrix sits whole inside one rank's shard."
awk '/"layerwise": true/ { found = 1 } found && /"name"/ { print; if (++n == 4) exit }' \
  "$out/layout-layerwise.json"
echo
echo "The same layerwise plan with --packer balanced: every promise kept, less padding."
echo "\$ build/paramlayout plan $manifest --dp 8 --strategy layerwise --packer balanced -q -o layout-balanced.json"
build/paramlayout plan "$manifest" --dp 8 --strategy layerwise --packer balanced -q \
  -o "$out/layout-balanced.json"
echo "\$ build/paramlayout stats layout-balanced.json --manifest $manifest"
(root=$PWD && cd "$out" && "$root/build/paramlayout" stats layout-balanced.json \
  --manifest "$root/$manifest")
