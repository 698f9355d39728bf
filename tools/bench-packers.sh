#!/usr/bin/env bash
# Compares the layerwise packers (issue 6): real model shapes synthesized from the configs in
# testdata/configs/, planned at dp 8, 16, 64 and 256 with `--packer megatron` and
# `--packer balanced`; writes docs/PACKING.md (padding, floor, Newton-Schulz imbalance and
# its bound, plan time). Usage: tools/bench-packers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
paramlayout_release_build

bin=build-release/paramlayout
data=build-release/packers
mkdir -p "$data"
shapes=(
  "llama3-70b|--tp 8 --pp 4 --stage 0|Llama-3-70B, TP8, PP stage 1 of 4"
  "gpt3-175b|--tp 8 --pp 8 --stage 0|GPT-3 175B, TP8, PP stage 1 of 8"
  "mixtral-8x7b|--tp 2 --ep 8 --etp 1|Mixtral 8x7B, TP2, EP8"
  "qwen3-30b-a3b|--ep 8|Qwen3-30B-A3B, EP8"
  "deepseek-v3|--ep 64|DeepSeek-V3, EP64 (all 61 layers)"
)
# field STATS_JSON NAME FORMAT: one figure of `paramlayout stats --json`.
field() {
  python3 -c 'import json, sys; print(format(json.loads(sys.argv[1])[sys.argv[2]], sys.argv[3]))' "$@"
}
out=docs/PACKING.md
{
  echo "# Layerwise packing: \`megatron\` vs \`balanced\`"
  echo
  echo "Measured by \`tools/bench-packers.sh\` on $(date -u +%F), $(nproc) cores of"
  echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs). Each shape is one rank's"
  echo "chunk, synthesized by \`paramlayout synth\` from \`testdata/configs/\`; default bucket size;"
  echo "expert dp = dp. Padding and floor are elements over param elements, of the whole layout"
  echo "(the floor: no layout under the rules can pad less, since a bucket of dp equal shards"
  echo "holds its largest param whole). Imbalance: the heaviest rank's Newton-Schulz cost over"
  echo "the mean (bound: what the largest single matrix forces). Plan: the whole plan (every"
  echo "buffer, manifest already parsed), best of 20 runs of \`build-release/bench_plan\`; the"
  echo "last column is balanced over megatron."
  echo
  echo "| shape | dp | megatron padding | balanced padding | floor | megatron imbalance | balanced imbalance | bound | megatron plan ms | balanced plan ms | time ratio |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  for entry in "${shapes[@]}"; do
    IFS='|' read -r config split title <<<"$entry"
    manifest=$data/$config.json
    # shellcheck disable=SC2086
    "$bin" synth "testdata/configs/$config.json" $split -q -o "$manifest"
    for dp in 8 16 64 256; do
      row="| $title | $dp"
      declare -A pad imb ms
      for packer in megatron balanced; do
        layout=$data/$config-$dp-$packer.json
        "$bin" plan "$manifest" --dp "$dp" --strategy layerwise --packer "$packer" -q -o "$layout"
        ms[$packer]=$(build-release/bench_plan "$manifest" "layerwise/$packer" "$dp" |
          sed -n 's/.*plan \([0-9.]*\) ms.*/\1/p')
        stats=$("$bin" stats "$layout" --manifest "$manifest" --json)
        pad[$packer]=$(field "$stats" padding_percent .2f)%
        imb[$packer]=$(field "$stats" cost_imbalance .3f)
        floor=$(field "$stats" floor_percent .2f)%
        bound=$(field "$stats" cost_imbalance_bound .3f)
      done
      echo "$row | ${pad[megatron]} | ${pad[balanced]} | $floor | ${imb[megatron]} | ${imb[balanced]} | $bound | ${ms[megatron]} | ${ms[balanced]} | $(python3 -c "print(f'{${ms[balanced]} / ${ms[megatron]}:.2f}x')") |"
    done
  done
  cat <<'TEXT'

## What `balanced` does

Layerwise buckets must be dp shards of one size, each param whole in one shard, buckets
contiguous in backprop order. Megatron-LM's packer closes a bucket once it reaches
max(bucket_size, 0.9 x dp x its largest param) and spreads it with a 1.3 x average cap, so
a bucket whose largest matrix sets the shard size often holds too few others to fill dp
shards of that size, and the last bucket of a run is nearly empty.

`balanced` (src/core/strategies/layerwise_balanced.cpp):
1. counts the buckets a run needs greedily (each takes params while they fit dp shards of
   max(bucket_size / dp, its largest param));
2. cuts the run into that many buckets of about equal totals, and also tries a few counts
   fewer (larger buckets: bucket_size is a soft target), keeping the count that pads least;
   a count whose buckets cannot beat the best so far (or Megatron-LM's size for the
   buffer) even at their lower bounds is dropped before any packing;
3. gives each bucket the smallest shard size at which best-fit-decreasing packs its params
   (from a lower bound up: the largest param, total / dp, and the k + 1 smallest of the
   k x dp + 1 largest params, which some shard must share; galloping, then bisecting; a
   packing at one size also holds at its fullest shard's, where the search goes on);
   buckets of the same params (experts) are packed once;
4. at that size packs the params by cost where they fit (costliest matrix to the cheapest
   shard with room, balancing Newton-Schulz work), else keeps best-fit's packing;
5. gives each bucket's shards to ranks, buckets with the costliest shard first, costliest
   shard onto the least-loaded rank; then, while the heaviest rank is heavier than under
   Megatron-LM's packer, swaps two shards of one bucket where that lightens it most;
6. packs the buffer Megatron-LM's way too (first), and keeps that layout where `balanced`
   would pad more or load its heaviest rank more: it never loses on either figure.

Best-fit keeps runs of equal shards together, so thousands of equal experts cost a few
steps per run, not one per expert: on the DeepSeek-V3 manifest with all 256 experts on one
rank (30k params) `balanced` plans in 1.2-1.5x Megatron-LM's packer's time
(docs/PERFORMANCE.md). On the small shapes above both take well under a millisecond and
the ratio is noisy.

Both are checked by `paramlayout check` (every promise) in the `packer` unit suite, over the
70 layerwise reference cases and the shapes above.

The floor is a bound, not always reachable, which is why the average over dp 8 and 16
stays above it. GPT-3's stage at dp 16 is one bucket of 24 75.5 M, 12 56.6 M, 12 18.9 M
matrices and a 25.2 M position embedding; every sum of these sizes that fits a shard is
about 169.9 M, 176.2 M (once, with the position embedding) or at least 188.7 M, while the
average shard needs 171.4 M: so 188.7 M shards (9.8% padding) is the best one bucket can do;
two buckets of six layers pad about as much (94.4 M shards for an 85.7 M average). At dp 8
the same stage needs a bucket holding the position embedding, whose shards cannot all be
filled: about 4.5% is the best two buckets do. Llama-3-70B's stage (20 layers of 56, 28, 10
and 8 units of 2^20 elements) is two buckets at dp 8: an exact search over every split
point and packing finds 1.18% for two buckets and 0.39% for one (a bucket for the whole
stage, which gives up overlapping the reduction with the backward pass); `balanced` pads
1.85%.
TEXT
} >"$out"
cat "$out"
