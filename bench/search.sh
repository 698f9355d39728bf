#!/usr/bin/env bash
# What `paramlayout search` costs, in a release build (build-release/), as a markdown table:
# DeepSeek-V3 on 1,024 GPUs over the whole space its line leaves open (tp, pp, vpp, cp, ep,
# etp, the split, sequence parallelism, recompute) and Llama-3-70B on 64 GPUs, on one thread
# and on every core. For each: the launches listed, the layouts planned, the least wall and
# CPU time of RUNS runs, launches and plans per second of wall time, and the peak memory.
# Usage: [RUNS=N] bench/search.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
runs=${RUNS:-3}

deepseek=(search --world-size 1024 --hf-config testdata/configs/deepseek-v3.json
  --gpu-memory H100 -- --mtp-num-layers 1 --bf16 --use-distributed-optimizer
  --overlap-grad-reduce --moe-grouped-gemm --micro-batch-size 1 --global-batch-size 4096
  --seq-length 4096)
llama=(search --world-size 64 --hf-config testdata/configs/llama3-70b.json --gpu-memory H100
  -- --bf16 --use-distributed-optimizer --micro-batch-size 1 --global-batch-size 512
  --seq-length 8192)

echo "Measured by bench/search.sh on $(machine)."
echo
echo "| search | threads | launches | layouts planned | wall s | CPU s | launches/s | plans/s | peak RSS MB |"
echo "|---|---|---|---|---|---|---|---|---|"
row() {  # DESCRIPTION THREADS COMMAND...
  local what=$1 threads=$2 first launches plans wall cpu rss
  shift 2
  # "... N launches Megatron-LM accepts (M layouts planned) ..."
  first=$("$bin" "$1" --threads "$threads" "${@:2}" 2>/dev/null | sed -n 1p)
  launches=$(sed -n 's/.*: \([0-9,]*\) launches.*/\1/p' <<<"$first" | tr -d ,)
  plans=$(sed -n 's/.*(\([0-9,]*\) layouts planned.*/\1/p' <<<"$first" | tr -d ,)
  read -r wall cpu rss <<<"$(best_of "$runs" "$bin" "$1" --threads "$threads" "${@:2}")"
  python3 - "$what" "$threads" "$launches" "$plans" "$wall" "$cpu" "$rss" <<'PY'
import sys
what, threads, launches, plans, wall, cpu, rss = sys.argv[1:]
w = float(wall) / 1e3
print(f"| {what} | {threads} | {int(launches):,} | {int(plans):,} | {w:.2f} | "
      f"{float(cpu) / 1e3:.2f} | {int(launches) / w:,.0f} | {int(plans) / w:,.0f} | {rss} |")
PY
}
cores=$(nproc)
row "DeepSeek-V3, 1,024 GPUs, whole space" 1 "${deepseek[@]}"
row "DeepSeek-V3, 1,024 GPUs, whole space" "$cores" "${deepseek[@]}"
row "Llama-3-70B, 64 GPUs, whole space" 1 "${llama[@]}"
row "Llama-3-70B, 64 GPUs, whole space" "$cores" "${llama[@]}"
