#!/usr/bin/env bash
# Instructions per plan inside paramlayout::plan (callgrind, 20 plans of bench_plan), with
# each layerwise packer, on the shapes of bench/packers.sh at dp 8 and 16, as a markdown
# table. Unlike the clock, these do not move with the machine's load, so a change to a
# packer can be weighed on a busy machine. Run bench/packers.sh first (it synthesizes the
# manifests). Usage: bench/packers-instructions.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"

data=build-release/packers
echo "Measured by bench/packers-instructions.sh on $(machine)."
echo
echo "| shape | dp | megatron | balanced | ratio |"
echo "|---|---|---|---|---|"
for config in llama3-70b gpt3-175b mixtral-8x7b qwen3-30b-a3b deepseek-v3; do
  manifest=$data/$config.json
  [ -f "$manifest" ] || { echo "no $manifest: run bench/packers.sh first" >&2; exit 1; }
  for dp in 8 16; do
    declare -A per_plan
    for packer in megatron balanced; do
      per_plan[$packer]=$(plan_instructions "$manifest" "layerwise/$packer" "$dp")
    done
    echo "| $config | $dp | ${per_plan[megatron]} | ${per_plan[balanced]} |" \
      "$(python3 -c "print(f'{${per_plan[balanced]} / ${per_plan[megatron]}:.2f}x')") |"
  done
done
