#!/usr/bin/env bash
# Installs what is missing, builds build/, and plans a whole job: DeepSeek-V3's launch line
# on 1,024 GPUs (16 pipeline stages of 2 virtual chunks, 64-way expert parallelism,
# multi-token prediction), checks the whole job (every chunk, and its recorded launch
# planned again), and compares Megatron-LM's layerwise (Muon) packing with the balanced
# one on a Llama-3-70B job.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
paramlayout_install
paramlayout_configure build
paramlayout_step "building the program in build/ (a few minutes the first time)"
meson compile -C build paramlayout
paramlayout_step "built; planning"
echo

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
config=testdata/configs/deepseek-v3.json
args=(--pipeline-model-parallel-size 16 --expert-model-parallel-size 64
      --pipeline-model-parallel-layout 'Et*3|(tt|)*29m|L' --mtp-num-layers 1
      --bf16 --use-distributed-optimizer --overlap-grad-reduce --moe-grouped-gemm
      --lr 1e-4 --micro-batch-size 1 --global-batch-size 4096 --seq-length 4096
      --recompute-granularity full --recompute-method uniform --recompute-num-layers 1)
echo "\$ build/paramlayout job --world-size 1024 --hf-config $config --gpu-memory H100 -o ds3/ -- ${args[*]}"
build/paramlayout job --world-size 1024 --hf-config "$config" --gpu-memory H100 -o "$out/ds3" \
  -- "${args[@]}"
echo
echo "\$ build/paramlayout check ds3/ --replan"
(cd "$out" && "$OLDPWD/build/paramlayout" check ds3/ --replan)
echo
echo "Llama-3-70B with Muon (--optimizer muon) on 256 GPUs: each matrix whole in one rank's"
echo "shard. The first chunk is bucketed; --packer balanced packs its buckets with less padding."
llama=(--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --bf16
       --use-distributed-optimizer --overlap-grad-reduce --optimizer muon)
for packer in megatron balanced; do
  echo "\$ build/paramlayout job --world-size 256 --hf-config testdata/configs/llama3-70b.json --packer $packer -- ${llama[*]}"
  build/paramlayout job --world-size 256 --hf-config testdata/configs/llama3-70b.json \
    --packer "$packer" -- "${llama[@]}" | grep -E "^  stage chunk|^      0     0"
done
