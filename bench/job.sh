#!/usr/bin/env bash
# What `paramlayout job` costs on whole jobs, in a release build (build-release/), as a
# markdown table: the DeepSeek-V3 launch line on 1,024 GPUs (32 chunks) and Llama-3.1-405B
# on 2,048 (32 chunks), planned alone (-q) and written out (-o: 65 files, each flushed to
# disk). For each, its instructions (callgrind, whole process), its least CPU and wall time
# of RUNS runs, and its peak memory. Then the DeepSeek-V3 job read back: `check` (every
# chunk's promises, job.json against its files) and `check --replan` (the recorded launch
# planned again and compared file by file).
# Usage: [RUNS=N] bench/job.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
runs=${RUNS:-10}
out=build-release/bench/job
mkdir -p "$out"

deepseek=(job --world-size 1024 --hf-config testdata/configs/deepseek-v3.json -q)
deepseek_args=(-- --pipeline-model-parallel-size 16 --expert-model-parallel-size 64
  --pipeline-model-parallel-layout 'Et*3|(tt|)*29m|L' --mtp-num-layers 1 --bf16
  --use-distributed-optimizer --overlap-grad-reduce --moe-grouped-gemm)
llama=(job --world-size 2048 -q)
llama_args=(-- --num-layers 126 --hidden-size 16384 --ffn-hidden-size 53248
  --num-attention-heads 128 --group-query-attention --num-query-groups 8 --swiglu
  --normalization RMSNorm --disable-bias-linear --position-embedding-type rope
  --untie-embeddings-and-output-weights --vocab-size 128256 --tensor-model-parallel-size 8
  --pipeline-model-parallel-size 16 --num-virtual-stages-per-pipeline-rank 2
  --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split --bf16
  --use-distributed-optimizer --overlap-grad-reduce)

echo "Measured by bench/job.sh on $(machine)."
echo
echo "| job | output | instructions | CPU ms | wall ms | peak RSS MB |"
echo "|---|---|---|---|---|---|"
row() {  # DESCRIPTION OUTPUT COMMAND...
  local what=$1 output=$2
  shift 2
  echo "| $what | $output | $(command_cells "$runs" "$@") |"
}
row "DeepSeek-V3, 1,024 GPUs, PP 16 x VPP 2, EP 64, MTP" "summary only" \
  "$bin" "${deepseek[@]}" "${deepseek_args[@]}"
row "DeepSeek-V3, 1,024 GPUs, PP 16 x VPP 2, EP 64, MTP" "-o: 65 files" \
  "$bin" "${deepseek[@]}" -o "$out/deepseek-v3" "${deepseek_args[@]}"
row "DeepSeek-V3, layerwise (Muon), balanced packer" "-o: 65 files" \
  "$bin" "${deepseek[@]}" --packer balanced -o "$out/deepseek-v3-muon" "${deepseek_args[@]}" \
  --optimizer muon
row "Llama-3.1-405B, 2,048 GPUs, TP 8, PP 16 x VPP 2" "-o: 65 files" \
  "$bin" "${llama[@]}" -o "$out/llama-405b" "${llama_args[@]}"
row "DeepSeek-V3 job read back (32 chunks)" "check" \
  "$bin" check "$out/deepseek-v3"
row "DeepSeek-V3 job read back (32 chunks)" "check --replan" \
  "$bin" check --replan "$out/deepseek-v3"
