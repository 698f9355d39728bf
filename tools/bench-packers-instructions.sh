#!/usr/bin/env bash
# Instructions per plan inside paramlayout::plan (callgrind), megatron vs balanced, on the
# shapes of tools/bench-packers.sh at dp 8 and 16. Unlike the clock this is deterministic,
# so a change to the packers can be weighed on a noisy machine. Run tools/bench-packers.sh
# first (it synthesizes the manifests). Usage: tools/bench-packers-instructions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
paramlayout_install valgrind
paramlayout_release_build

data=build-release/packers
echo "| shape | dp | megatron | balanced | ratio |"
echo "|---|---|---|---|---|"
for config in llama3-70b gpt3-175b mixtral-8x7b qwen3-30b-a3b deepseek-v3; do
  manifest=$data/$config.json
  [ -f "$manifest" ] || { echo "no $manifest: run tools/bench-packers.sh first" >&2; exit 1; }
  for dp in 8 16; do
    declare -A per_plan
    for packer in megatron balanced; do
      run=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        --toggle-collect='paramlayout::plan(*' build-release/bench_plan --runs 20 "$manifest" \
        "layerwise/$packer" "$dp" 2>&1)
      total=$(sed -n 's/.*Collected : \([0-9]*\)/\1/p' <<<"$run")
      runs=$(sed -n 's/.*(best of \([0-9]*\)).*/\1/p' <<<"$run")  # how many plans it made
      per_plan[$packer]=$((total / runs))
    done
    echo "| $config | $dp | ${per_plan[megatron]} | ${per_plan[balanced]} |" \
      "$(python3 -c "print(f'{${per_plan[balanced]} / ${per_plan[megatron]}:.2f}x')") |"
  done
done
