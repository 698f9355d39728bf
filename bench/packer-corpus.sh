#!/usr/bin/env bash
# A wider look at the balanced packer than docs/PACKING.md's five shapes: 36 chunks
# synthesized from testdata/configs/ (dense models at five TP/PP splits, MoE models at
# three EP splits) planned at dp 4, 8, 16 and 32. Prints each case's padding and Newton-
# Schulz imbalance, the mean padding and one hash of every layout, so that a change to the
# packer that keeps its layouts can be told from one that does not.
# Usage: bench/packer-corpus.sh [OUT.tsv]
set -euo pipefail
source "$(dirname "$0")/lib.sh"

data=build-release/corpus
mkdir -p "$data"
out=${1:-$data/corpus.tsv}
dense=("--tp 1" "--tp 2 --pp 2 --stage 1" "--tp 4 --pp 4 --stage 2" "--tp 8 --pp 8 --stage 3"
       "--tp 8 --pp 4 --stage 0")
moe=("--ep 8" "--tp 2 --ep 4 --pp 2 --stage 1" "--ep 16 --pp 4 --stage 1")
manifests=()
synth() {  # CONFIG SPLIT: synthesizes one chunk, skipping splits the model does not divide
  local name
  name=$data/$1$(tr -d ' -' <<<"$2").json
  # shellcheck disable=SC2086
  "$bin" synth "testdata/configs/$1.json" $2 -q -o "$name" 2>/dev/null && manifests+=("$name")
  return 0
}
for config in llama3-8b llama3-70b gpt3-175b mistral-7b-v0.1 qwen2-7b qwen3-8b gpt2; do
  for split in "${dense[@]}"; do synth "$config" "$split"; done
done
for config in mixtral-8x7b qwen3-30b-a3b deepseek-v3; do
  for split in "${moe[@]}"; do synth "$config" "$split"; done
done
printf 'manifest\tdp\tpadding %%\timbalance\n' >"$out"
: >"$data/hashes"  # a run cut short must not leave its hashes to the next
for manifest in "${manifests[@]}"; do
  for dp in 4 8 16 32; do
    layout=$data/layout.json
    "$bin" plan "$manifest" --dp "$dp" --strategy layerwise --packer balanced -q -o "$layout"
    sha256sum "$layout" | cut -d' ' -f1 >>"$data/hashes"
    "$bin" stats "$layout" --manifest "$manifest" --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
print("%s\t%s\t%.4f\t%.4f" % (sys.argv[1], sys.argv[2], s["padding_percent"], s["cost_imbalance"]))
' "$(basename "$manifest" .json)" "$dp" >>"$out"
  done
done
python3 - "$out" "$(sha256sum "$data/hashes" | cut -c1-12)" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
mean = sum(float(r["padding %"]) for r in rows) / len(rows)
print(f"{len(rows)} cases, mean padding {mean:.4f}%, layouts {sys.argv[2]}; per case: {sys.argv[1]}")
PY
rm -f "$data/hashes"
