#!/usr/bin/env bash
# What `check`, `diff`, `stats`, `render` and `synth` cost, in a release build
# (build-release/), as a markdown table: on the DeepSeek-V3 layouts bench/plan.sh writes
# (30,428 params; run it first), and `synth` on the shipped configs. For each command, its
# instructions (callgrind, whole process), its least CPU and wall time of RUNS runs, and its
# peak memory.
# Usage: [RUNS=N] bench/commands.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
runs=${RUNS:-10}
data=build-release/bench
manifest=$data/deepseek-v3-ep1.json
for f in "$manifest" "$data"/{sequential-dp-megatron,layerwise-megatron,layerwise-balanced}-dp{8,512}.json; do
  [ -f "$f" ] || { echo "no $f: run bench/plan.sh first" >&2; exit 1; }
done
seq8=$data/sequential-dp-megatron-dp8.json
lw8=$data/layerwise-megatron-dp8.json
lw512=$data/layerwise-megatron-dp512.json
bal8=$data/layerwise-balanced-dp8.json

echo "Measured by bench/commands.sh on $(machine)."
echo
echo "| command | on | instructions | CPU ms | wall ms | peak RSS MB |"
echo "|---|---|---|---|---|---|"
row() {  # DESCRIPTION INPUT COMMAND...
  local what=$1 on=$2
  shift 2
  echo "| \`$what\` | $on | $(command_cells "$runs" "$@") |"
}
row "check --replan" "layerwise dp 8" "$bin" check "$lw8" --manifest "$manifest" --replan
row "check --replan" "layerwise dp 512" "$bin" check "$lw512" --manifest "$manifest" --replan
row "check --replan" "balanced dp 8" "$bin" check "$bal8" --manifest "$manifest" --replan
row "check" "sequential-dp dp 8" "$bin" check "$seq8" --manifest "$manifest"
row "diff" "layerwise dp 8 vs 512" "$bin" diff "$lw8" "$lw512"
row "diff --json" "sequential-dp vs layerwise, dp 8" "$bin" diff --json "$seq8" "$lw8"
row "stats" "layerwise dp 8" "$bin" stats "$lw8" --manifest "$manifest"
row "render" "layerwise dp 8" "$bin" render "$lw8" -o "$data/layerwise-dp8.svg"
row "render" "layerwise dp 512" "$bin" render "$lw512" -o "$data/layerwise-dp512.svg"
row "synth" "Llama-3-70B, TP 8, PP stage 1 of 4" "$bin" synth testdata/configs/llama3-70b.json \
  --tp 8 --pp 4 --stage 0 -q -o "$data/synth-llama.json"
row "synth" "DeepSeek-V3, EP 1 (whole)" "$bin" synth testdata/configs/deepseek-v3.json -q \
  -o "$data/synth-deepseek.json"
